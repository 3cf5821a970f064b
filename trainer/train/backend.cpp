#include "trainer/train/backend.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

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

}  // namespace

int resolved_threads(const BackendConfig& backend) {
  if (backend.threads > 0) return backend.threads;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // Ranks that mpirun started on this machine share its cores (Open MPI names their count).
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_here = local != nullptr ? std::max(1, std::atoi(local)) : 1;
  return std::max(1, cores / ranks_here);
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
