// NCCL for tensors in GPU memory: the device communicator of GPU runs, one GPU per rank
// (gpu_placement.h picks it). Each communicator queues its calls on a CUDA stream of its own,
// ordered after the kernels queued so far on the ops' stream by an event, so a started
// all-reduce (a data-parallel bucket) runs while backward goes on; a blocking call then waits
// for it on the host by polling, within the wait limits (wait_limits.h), so a rank that died
// or hangs ends the run instead of holding it. A wait that gives up aborts the NCCL
// communicator, which ends its kernels. NCCL matches sends and receives by order and takes
// no tags: a pipeline sends over one-way channels of two stages (pipeline_executor.h).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "trainer/parallel/communicator.h"

namespace kiln {

// A NCCL communicator over the ranks of `bootstrap` (MPI's world, or a world of one), on
// the current CUDA device, following `compute` (the ops' stream): rank 0 makes NCCL's id and
// broadcasts it over bootstrap. Collective over bootstrap.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap,
                                                     cudaStream_t compute);

}  // namespace kiln
