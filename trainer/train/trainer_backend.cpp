// Where a run trains: this rank's GPU and the device communicator its groups split from, or
// the CPU backend; and the start-up lines that say which GPU each rank took.
#include <fmt/core.h>
#include <unistd.h>

#include "trainer/parallel/device_world.h"
#include "trainer/parallel/gpu_placement.h"
#include "trainer/parallel/group_communicator.h"
#include "trainer/train/backend.h"
#include "trainer/train/trainer.h"

namespace kiln {

void Trainer::start_backend() {
  if (!uses_gpu(config_.backend)) {
    ops_ = make_ops(config_, 0);
    return;
  }
  const std::string comm = resolve_device_comm(config_.parallel.device_comm);
  const NodePlacement placement = node_placement(world_, placement_host());
  // Without a visible GPU make_ops says why.
  if (visible_gpus() > 0) gpu_ = gpu_for_rank(placement, visible_gpus(), comm == "mpi");
  ops_ = make_ops(config_, gpu_);
  device_world_ = make_device_world(world_, *ops_, comm);
}

std::unique_ptr<Communicator> Trainer::join_group(const std::vector<int>& ranks) {
  auto host = world_.split(ranks);
  if (!device_world_) return host;
  return make_group_communicator(std::move(host), device_world_->split(ranks));
}

void Trainer::place_ranks() {
  RankGpu mine{host_name(), device_world_ ? gpu_ : -1, "", getpid()};
#ifdef KILN_HAVE_CUDA
  if (device_world_) mine.bus_id = cuda_pci_bus_id(gpu_);
#endif
  rank_places_ = gather_rank_gpus(world_, mine);
  if (!is_first_rank() || !device_world_) return;
  for (const std::string& line : describe_rank_gpus(rank_places_)) fmt::print(out_, "kiln: {}\n", line);
  const bool staged = resolve_device_comm(config_.parallel.device_comm) == "mpi";
  fmt::print(out_, "kiln: GPU tensors move between ranks {}\n",
             staged ? "by MPI through page-locked host memory (parallel.device_comm=mpi)"
                    : "by NCCL, on streams of their own (parallel.device_comm=nccl)");
}

}  // namespace kiln
