// The device communicator over MPI (parallel.device_comm=mpi): for machines without NCCL and,
// above all, for several ranks sharing one GPU, which NCCL refuses. Each call on a device
// tensor copies it into page-locked host memory after the kernels that wrote it, runs the MPI
// call there, and copies the result back; a host tensor goes to MPI as it is. MPI cannot add
// bf16 or fp16 values, so reductions of those are done in float on the host and rounded back
// as the device rounds. Transfers wait on the host, so nothing overlaps compute but the MPI
// part of a started all-reduce; NCCL is the fast path.
#pragma once

#include <memory>

#include "kernels/ops.h"
#include "trainer/parallel/communicator.h"

namespace kiln {

// Staged calls over `host` (an MPI communicator, or a world of one), copying with `ops`,
// which must outlive the communicator and those split from it.
std::unique_ptr<Communicator> make_host_staged_communicator(std::unique_ptr<Communicator> host, Ops& ops);

}  // namespace kiln
