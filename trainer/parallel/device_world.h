// The device communicator over every rank of a GPU run (parallel.device_comm), from which
// each parallel group splits its own: NCCL, or MPI staged through host memory.
#pragma once

#include <memory>
#include <string>

#include "kernels/ops.h"
#include "trainer/parallel/communicator.h"

namespace kiln {

// "nccl" or "mpi": parallel.device_comm, with auto meaning nccl where this build has NCCL.
// Refuses nccl in a build without it.
std::string resolve_device_comm(const std::string& setting);

// Over the ranks of `world` (the host world), following the ops' stream. Collective.
std::unique_ptr<Communicator> make_device_world(Communicator& world, Ops& ops, const std::string& kind);

}  // namespace kiln
