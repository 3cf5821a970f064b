#include "trainer/train/backend.h"

#include <thread>

#include "kernels/check.h"

namespace kiln {

int resolved_threads(const BackendConfig& backend) {
  if (backend.threads > 0) return backend.threads;
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 ? static_cast<int>(cores) : 1;
}

std::unique_ptr<Ops> make_ops(const Config& config) {
  const std::string& device = config.backend.device;
  if (device == "cuda")
    fail("backend.device=cuda: this build has no CUDA backend yet; use backend.device=cpu");
  if (config.precision.dtype != "fp32")
    fail("precision.dtype=" + config.precision.dtype +
         " needs backend.device=cuda; the CPU backend trains in fp32");
  return make_cpu_ops(resolved_threads(config.backend));
}

}  // namespace kiln
