// One parallel group of a GPU run, as two communicators over the same ranks: the host one
// (MPI) carries host tensors (loss and norm sums, steering decisions, checkpoint gathers) and
// the device one (NCCL, or MPI staged through host memory) carries GPU tensors. Each call goes
// to the one that can move its tensor, so the parallel layers call one communicator as they
// do on the CPU.
#pragma once

#include <memory>

#include "trainer/parallel/communicator.h"

namespace kiln {

// `host` and `device` span the same ranks in the same order.
std::unique_ptr<Communicator> make_group_communicator(std::unique_ptr<Communicator> host,
                                                      std::unique_ptr<Communicator> device);

}  // namespace kiln
