#include "cli/openmp_waiting.h"

#include <unistd.h>

#include <cstdlib>

namespace kiln {

void exec_with_short_openmp_spins(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  // Set before the exec, so the new image sees it and does not come back here.
  if (::setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, 1) != 0) return;
  ::execv("/proc/self/exe", argv);
}

}  // namespace kiln
