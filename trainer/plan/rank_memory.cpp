#include "trainer/plan/rank_memory.h"

#include <memory>

#include "kernels/cpu/kernels.h"
#include "trainer/optim/adamw.h"
#include "trainer/plan/planned_group.h"

namespace kiln {

size_t RankMemory::total() const {
  size_t sum = 0;
  for (const ArenaSize& a : arenas) sum += a.bytes;
  return sum;
}

size_t RankMemory::bytes(const std::string& arena) const {
  for (const ArenaSize& a : arenas)
    if (a.name == arena) return a.bytes;
  return 0;
}

size_t op_workspace_bytes(bool gpu, int threads, int64_t micro_batch, int64_t seq, int64_t heads, int64_t head_dim) {
  if (!gpu) return static_cast<size_t>(threads) * cpu::attention_scratch_bytes(seq, head_dim);
  // kernels/cuda/attention.cu: attention_backward_workspace_bytes; kernels/cuda/matmul.h.
  return static_cast<size_t>(micro_batch * heads * seq) * sizeof(float) + (size_t{32} << 20);
}

RankGroups planned_rank_groups(const ParallelLayout& layout, int rank,
                               std::vector<std::unique_ptr<Communicator>>& held) {
  const auto group = [&](const std::vector<int>& ranks) -> Communicator* {
    int at = 0;
    while (ranks[static_cast<size_t>(at)] != rank) ++at;
    held.push_back(make_planned_group(static_cast<int>(ranks.size()), at));
    return held.back().get();
  };
  RankGroups groups;
  if (layout.tp() > 1) groups.tensor = group(layout.tensor_group(rank));
  groups.gradient = group(layout.gradient_group(rank));
  groups.pipeline = group(layout.pipeline_group(rank));
  if (layout.cp() > 1) groups.context = group(layout.context_group(rank));
  if (layout.expert_layout()) {
    groups.expert = group(layout.expert_group(rank));
    groups.expert_data = group(layout.expert_data_group(rank));
  }
  if (layout.replicates_shards()) {
    groups.shard = group(layout.shard_group(rank));
    groups.shard_replicas = group(layout.shard_replica_group(rank));
  }
  return groups;
}

RankMemory plan_rank_memory(const Config& config, const ParallelLayout& layout, int rank, Device device,
                            Ops& sizing_ops, size_t op_workspace) {
  std::vector<std::unique_ptr<Communicator>> held;
  const RankGroups groups = planned_rank_groups(layout, rank, held);
  const int stage = layout.coordinates(rank).pp;
  const ModelSplit split = rank_model_split(config, layout, groups, stage);
  std::unique_ptr<GptModel> model =
      GptModel::laid_out(config.model, config.train.micro_batch, sizing_ops, compute_dtype(config.precision, device),
                         activation_slots(config, layout, stage), split);
  RankMemory memory;
  memory.arenas = model->arenas();
  memory.arenas.push_back({"op workspace", op_workspace});
  memory.arenas.push_back(
      {"optimizer", AdamW::planned_bytes(model->parameters(), rank_optimizer_groups(config, layout, groups))});
  return memory;
}

}  // namespace kiln
