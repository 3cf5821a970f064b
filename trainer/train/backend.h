// Picks the op backend for a run from backend.device, backend.attention and precision.dtype,
// refusing combinations this build cannot run with one clear message.
#pragma once

#include <cstdio>
#include <memory>

#include "kernels/ops.h"
#include "trainer/config/config.h"
#include "trainer/train/core_share.h"

namespace kiln {

// A GPU backend on device `gpu` (an index among the visible GPUs), its attention kernels as
// backend.attention says, or the CPU backend, as backend.device says.
std::unique_ptr<Ops> make_ops(const Config& config, int gpu);
// Whether backend.device asks for a GPU: cuda, or auto where one is visible.
bool uses_gpu(const BackendConfig& backend);
// The GPUs this process can see (CUDA_VISIBLE_DEVICES applied); 0 in a build without CUDA.
int visible_gpus();
// The ranks the launcher started on this machine (Open MPI names their count); `unknown`
// where it does not say.
int ranks_here(int unknown = 1);
// backend.threads, or (0) the cores this process may use shared out among the ranks mpirun
// started on this machine.
int resolved_threads(const BackendConfig& backend);
// A CPU run that takes every core (backend.threads=0) shares them with the other CPU runs on
// this machine (trainer/train/core_share.h); null for a device or a fixed thread count, or
// with a warning on `out` when the registry cannot be used.
std::unique_ptr<CoreShare> share_cores(const Config& config, const Ops& ops, std::FILE* out);

}  // namespace kiln
