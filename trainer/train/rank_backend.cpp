#include "trainer/train/rank_backend.h"

#include <unistd.h>

#include <fmt/core.h>

#include "trainer/parallel/device_world.h"
#include "trainer/parallel/group_communicator.h"
#include "trainer/parallel/host_spans.h"
#include "trainer/train/backend.h"

namespace kiln {

RankBackend::RankBackend(const Config& config, const ParallelLayout& layout, Communicator& world, std::FILE* out)
    : config_(config), layout_(layout), world_(world), out_(out) {
  if (uses_gpu(config_.backend)) {
    const std::string comm = resolve_device_comm(config_.parallel.device_comm);
    const NodePlacement placement = node_placement(world_, placement_host());
    // Without a visible GPU make_ops says why.
    if (visible_gpus() > 0) gpu_ = gpu_for_rank(placement, visible_gpus(), comm == "mpi");
    ops_ = make_ops(config_, gpu_);
    device_world_ = make_device_world(world_, *ops_, comm);
  } else {
    ops_ = make_ops(config_, 0);
  }
  // Every rank joins its groups, in the same order on all (each split is a collective).
  const int rank = world_.rank();
  tensor_group_ = join_group(layout_.tensor_group(rank));
  data_group_ = join_group(layout_.data_group(rank));
  pipeline_group_ = join_group(layout_.pipeline_group(rank));
  if (layout_.cp() > 1) {
    context_group_ = join_group(layout_.context_group(rank));
    data_context_group_ = join_group(layout_.gradient_group(rank));
  }
  if (layout_.expert_layout()) {
    expert_group_ = join_group(layout_.expert_group(rank));
    expert_data_group_ = join_group(layout_.expert_data_group(rank));
  }
  if (layout_.replicates_shards()) {
    shard_group_ = join_group(layout_.shard_group(rank));
    shard_replica_group_ = join_group(layout_.shard_replica_group(rank));
  }
  // The stages that hold the embedding and the head (the first and the last virtual stage's):
  // the same one in a V, which reads the one embedding at both ends.
  const PipelinePlacement at = pipeline_placement(config_, layout_);
  const int embedding_stage = at.rank_of(0), head_stage = at.rank_of(at.stages() - 1);
  if (config_.model.head_reads_embedding() && embedding_stage != head_stage) {
    // The two stages of each pipeline keep their two copies of the embedding equal; the
    // stages between are groups of their own.
    const RankCoordinates coordinates = layout_.coordinates(rank);
    const int stage = coordinates.pp;
    RankCoordinates first = coordinates, last = coordinates;
    first.pp = embedding_stage;
    last.pp = head_stage;
    auto group = join_group(stage == embedding_stage || stage == head_stage
                                ? std::vector<int>{layout_.rank_of(first), layout_.rank_of(last)}
                                : std::vector<int>{rank});
    if (group->size() > 1) embedding_group_ = std::move(group);
  }
  core_share_ = share_cores(config_, *ops_, out_);
  threads_ = resolved_threads(config_.backend);
}

RankBackend::~RankBackend() = default;

std::unique_ptr<Communicator> RankBackend::join_group(const std::vector<int>& ranks) {
  auto host = world_.split(ranks);
  if (!device_world_) return host;
  return make_group_communicator(std::move(host), device_world_->split(ranks));
}

RankGroups RankBackend::groups() const {
  RankGroups groups;
  groups.tensor = layout_.tp() > 1 ? tensor_group_.get() : nullptr;
  groups.gradient = &gradient_group();
  groups.shard = shard_group_.get();
  groups.shard_replicas = shard_replica_group_.get();
  groups.pipeline = pipeline_group_.get();
  groups.context = context_group_.get();
  groups.expert = expert_group_.get();
  groups.expert_data = expert_data_group_.get();
  return groups;
}

void RankBackend::place_ranks() {
  RankGpu mine{host_name(), device_world_ ? gpu_ : -1, "", getpid()};
#ifdef KILN_HAVE_CUDA
  if (device_world_) mine.bus_id = cuda_pci_bus_id(gpu_);
#endif
  places_ = gather_rank_gpus(world_, mine);
  if (world_.rank() != 0) return;
  std::vector<std::string> hosts;
  for (const RankGpu& p : places_) hosts.push_back(p.host);
  for (const std::string& line : describe_host_spans(layout_, hosts)) fmt::print(out_, "kiln: {}\n", line);
  if (!device_world_) return;
  for (const std::string& line : describe_rank_gpus(places_)) fmt::print(out_, "kiln: {}\n", line);
  const bool staged = resolve_device_comm(config_.parallel.device_comm) == "mpi";
  fmt::print(out_, "kiln: GPU tensors move between ranks {}\n",
             staged ? "by MPI through page-locked host memory (parallel.device_comm=mpi)"
                    : "by NCCL, on streams of their own (parallel.device_comm=nccl)");
}

void RankBackend::share_machine(int64_t step) {
  if (!core_share_) return;
  const int threads = core_share_->threads();
  if (threads != threads_) {
    threads_ = threads;
    ops_->limit_threads(threads);
  }
  // The threads follow every count; the output only a change that lasts (ShareNotice).
  if (!core_share_->say_share()) return;
  const std::string who = core_share_->runs() == 1
                              ? std::string("no other CPU run here now")
                              : fmt::format("{} CPU runs share this machine's {} cores", core_share_->runs(),
                                            core_share_->cores());
  fmt::print(out_, "kiln: {}: step {} on {} thread{}\n", who, step, threads, threads == 1 ? "" : "s");
}

}  // namespace kiln
