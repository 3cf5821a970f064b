// Where and with whom this rank trains: its op backend (the CPU, or its GPU with the device
// communicator its groups split from), the groups of the layout it joined, its share of a
// machine other CPU runs train on too, and where every rank runs, for the store.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "kernels/ops.h"
#include "trainer/config/config.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/gpu_placement.h"
#include "trainer/parallel/layout.h"
#include "trainer/plan/rank_build.h"
#include "trainer/train/core_share.h"

namespace kiln {

class RankBackend {
 public:
  // Picks this rank's GPU, makes the ops (and on a GPU the device communicator), joins the
  // layout's groups in the same order on every rank, and takes a CPU run's share of the
  // machine. Collective over the world.
  RankBackend(const Config& config, const ParallelLayout& layout, Communicator& world, std::FILE* out);
  ~RankBackend();
  RankBackend(const RankBackend&) = delete;
  RankBackend& operator=(const RankBackend&) = delete;

  Ops& ops() const { return *ops_; }
  int gpu() const { return gpu_; }
  Communicator& tensor_group() const { return *tensor_group_; }
  Communicator& data_group() const { return *data_group_; }
  Communicator& pipeline_group() const { return *pipeline_group_; }
  // The ranks that sum each gradient: the data- and context-parallel group, else the data group.
  Communicator& gradient_group() const { return data_context_group_ ? *data_context_group_ : *data_group_; }
  // Null where the layout has no such group (layout.h).
  Communicator* expert_group() const { return expert_group_.get(); }
  Communicator* expert_data_group() const { return expert_data_group_.get(); }
  // The ranks the sharded state is sharded over (parallel.shard_group, else the gradient
  // group), and this rank's replicas in the other shard groups (null without).
  Communicator& shard_group() const { return shard_group_ ? *shard_group_ : gradient_group(); }
  Communicator* shard_replica_group() const { return shard_replica_group_.get(); }
  // The first and last stages of a pipeline whose output layer is tied to the embedding;
  // null elsewhere.
  Communicator* embedding_group() const { return embedding_group_.get(); }
  // The groups as rank_build.h takes them.
  RankGroups groups() const;

  // Gathers where every rank runs (host, GPU, process) on the first rank, for the store, and
  // prints which GPU each rank took. Collective.
  void place_ranks();
  // Every rank's place, on the first rank, once place_ranks has run.
  const std::vector<RankGpu>& places() const { return places_; }

  // Trains the coming step on this run's share of the cores as other CPU runs start and end.
  void share_machine(int64_t step);
  // The CPU threads it trains on now.
  int threads() const { return core_share_ ? core_share_->threads() : threads_; }

 private:
  // This rank's communicator over `ranks` (as the layout names a group): the host one, joined
  // on a GPU run by its device twin. Collective over the world.
  std::unique_ptr<Communicator> join_group(const std::vector<int>& ranks);

  const Config& config_;
  const ParallelLayout& layout_;
  Communicator& world_;
  std::FILE* out_;
  // Declared before the communicators, which a GPU run's copy with the ops: they go first.
  std::unique_ptr<Ops> ops_;
  int gpu_ = 0;  // the device a GPU run's ops run on
  // A GPU run's device communicator over every rank (NCCL, or MPI staged through host
  // memory), from which each group splits its own; null on the CPU, where MPI moves all.
  std::unique_ptr<Communicator> device_world_;
  std::unique_ptr<Communicator> tensor_group_;
  std::unique_ptr<Communicator> data_group_;
  std::unique_ptr<Communicator> pipeline_group_;
  // Context parallelism's groups (layout.h): the ranks that share each sequence, and the
  // data-parallel and context-parallel ranks that sum the gradients; null when cp is 1.
  std::unique_ptr<Communicator> context_group_;
  std::unique_ptr<Communicator> data_context_group_;
  std::unique_ptr<Communicator> expert_group_;  // null when the layout has no expert split
  std::unique_ptr<Communicator> shard_group_;          // parallel.shard_group below the gradient ranks
  std::unique_ptr<Communicator> shard_replica_group_;  // likewise
  std::unique_ptr<Communicator> expert_data_group_;
  std::unique_ptr<Communicator> embedding_group_;
  std::unique_ptr<CoreShare> core_share_;  // a CPU run's share of the machine; null on a device
  int threads_ = 0;                         // the CPU threads it trains on now
  std::vector<RankGpu> places_;
};

}  // namespace kiln
