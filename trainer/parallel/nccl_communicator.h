// NCCL for tensors in GPU memory: the communicator of GPU runs, one GPU per rank (the
// launcher's node-local rank picks it: launched_local_rank() in launch.h). Every call is
// queued on the stream the CUDA ops run on, so it follows the kernels that wrote its input;
// a blocking call then waits for it on the host by polling, within the wait limits
// (wait_limits.h), so a rank that died or hangs ends the run instead of holding it. A wait
// that gives up aborts the NCCL communicator, which ends its kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "trainer/parallel/communicator.h"

namespace kiln {

// A NCCL communicator over the ranks of `bootstrap` (MPI's world, or a world of one), on
// the current CUDA device: rank 0 makes NCCL's id and broadcasts it over bootstrap.
// Collective over bootstrap.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap,
                                                     cudaStream_t stream);

}  // namespace kiln
