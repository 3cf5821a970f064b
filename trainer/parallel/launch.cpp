#include "trainer/parallel/launch.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

namespace kiln {
namespace {

// The launcher's variable naming the world size, or null.
const char* world_size_variable() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* value = std::getenv(name)) return value;
  return nullptr;
}

}  // namespace

bool launched_by_mpi() { return world_size_variable() != nullptr; }

int launched_world_size() {
  const char* value = world_size_variable();
  return value != nullptr && std::atoi(value) > 0 ? std::atoi(value) : 1;
}

}  // namespace kiln
