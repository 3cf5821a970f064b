#include "trainer/train/backend.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/core.h>

#include "kernels/check.h"
#include "trainer/parallel/launch.h"

namespace kiln {

namespace {

bool cuda_available() {
#ifdef KILN_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Ops> make_gpu_ops() {
#ifdef KILN_HAVE_CUDA
  if (cuda_device_count() == 0)
    fail("backend.device=cuda: no CUDA GPU is visible to this process (check nvidia-smi and "
         "CUDA_VISIBLE_DEVICES), or use backend.device=cpu");
  // One GPU per rank: the ranks a launcher started on a machine take its GPUs in turn.
  return make_cuda_ops(launched_local_rank() % cuda_device_count());
#else
  fail("backend.device=cuda: this build has no CUDA backend (configure with nvcc on the PATH "
       "and -DKILN_CUDA=ON), or use backend.device=cpu");
#endif
}

int ranks_here() {
  // Ranks that mpirun started on this machine share its cores (Open MPI names their count).
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return local != nullptr ? std::max(1, std::atoi(local)) : 1;
}

}  // namespace

int resolved_threads(const BackendConfig& backend) {
  if (backend.threads > 0) return backend.threads;
  return std::max(1, usable_cores() / ranks_here());
}

std::unique_ptr<CoreShare> share_cores(const Config& config, const Ops& ops, std::FILE* out) {
  if (ops.device() != Device::Cpu || config.backend.threads > 0) return nullptr;
  try {
    return std::make_unique<CoreShare>(cpu_run_registry(), usable_cores(), ranks_here());
  } catch (const Error& e) {
    fmt::print(out, "kiln: warning: {}; this run takes every core whatever else runs here\n", e.what());
    return nullptr;
  }
}

std::unique_ptr<Ops> make_ops(const Config& config) {
  const std::string& device = config.backend.device;
  const bool gpu = device == "cuda" || (device == "auto" && cuda_available());
  if (gpu) return make_gpu_ops();
  if (config.precision.dtype != "fp32")
    fail("precision.dtype=" + config.precision.dtype +
         " needs backend.device=cuda; the CPU backend trains in fp32");
  return make_cpu_ops(resolved_threads(config.backend));
}

}  // namespace kiln
