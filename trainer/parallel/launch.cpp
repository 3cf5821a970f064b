#include "trainer/parallel/launch.h"

#include <cstdlib>
#include <initializer_list>

namespace kiln {

int launched_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::atoi(value) > 0) return std::atoi(value);
  }
  return 1;
}

}  // namespace kiln
