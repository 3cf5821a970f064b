#include "trainer/train/backend.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {

namespace {

#ifdef KILN_HAVE_CUDA
AttentionChoice attention_choice(const std::string& attention) {
  if (attention == "cudnn") return AttentionChoice::Cudnn;
  if (attention == "kiln") return AttentionChoice::Kiln;
  KILN_CHECK(attention == "auto", "backend.attention must be one of auto, cudnn, kiln, got \"" +
                                      attention + "\"");
  return AttentionChoice::Auto;
}
#endif

std::unique_ptr<Ops> make_gpu_ops(int gpu, const std::string& attention) {
#ifdef KILN_HAVE_CUDA
  if (cuda_device_count() == 0)
    fail("backend.device=cuda: no CUDA GPU is visible to this process (check nvidia-smi and "
         "CUDA_VISIBLE_DEVICES), or use backend.device=cpu");
  KILN_CHECK(gpu >= 0 && gpu < cuda_device_count(), "no GPU " + std::to_string(gpu) + " among the " +
                                                        std::to_string(cuda_device_count()) + " visible");
  return make_cuda_ops(gpu, attention_choice(attention));
#else
  (void)gpu;
  (void)attention;
  fail("backend.device=cuda: this build has no CUDA backend (configure with nvcc on the PATH "
       "and -DKILN_CUDA=ON), or use backend.device=cpu");
#endif
}

}  // namespace

int ranks_here(int unknown) {
  // Ranks that mpirun started on this machine share its cores (Open MPI names their count).
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return local != nullptr ? std::max(1, std::atoi(local)) : unknown;
}

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

int visible_gpus() {
#ifdef KILN_HAVE_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

bool uses_gpu(const BackendConfig& backend) {
  return backend.device == "cuda" || (backend.device == "auto" && visible_gpus() > 0);
}

std::unique_ptr<Ops> make_ops(const Config& config, int gpu) {
  if (uses_gpu(config.backend)) {
    std::unique_ptr<Ops> ops = make_gpu_ops(gpu, config.backend.attention);
    if (config.precision.dtype == "fp8")
      if (const std::string why = ops->fp8_unsupported(); !why.empty()) fail("precision.dtype=fp8: " + why);
    return ops;
  }
  if (config.backend.attention == "cudnn")
    fail("backend.attention=cudnn needs a CUDA GPU, and backend.device=" + config.backend.device +
         " runs on the CPU, whose attention is kiln's kernels; use backend.attention=auto");
  if (config.precision.dtype != "fp32" && config.precision.dtype != "fp8")
    fail("precision.dtype=" + config.precision.dtype +
         " needs backend.device=cuda; the CPU backend trains in fp32 (and emulates fp8)");
  return make_cpu_ops(resolved_threads(config.backend));
}

}  // namespace kiln
