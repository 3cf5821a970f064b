#include "trainer/plan/rank_build.h"

#include <fmt/core.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "base/check.h"
#include "trainer/config/pipeline_layers.h"
#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/parallel/pipeline_timeline.h"
#include "trainer/parallel/dualpipev_schedule.h"
#include "trainer/parallel/zero_bubble_schedule.h"

namespace kiln {

DType compute_dtype(const PrecisionConfig& precision, Device device) {
  if (precision.dtype == "bf16") return DType::BF16;
  if (precision.dtype == "fp8") return device == Device::Cuda ? DType::BF16 : DType::F32;
  if (precision.dtype == "fp16") return DType::F16;
  return DType::F32;
}

std::optional<Fp8Recipe> fp8_recipe(const PrecisionConfig& precision) {
  if (precision.dtype != "fp8") return std::nullopt;
  return Fp8Recipe{precision.fp8_scaling, precision.fp8_amax_history, "max", precision.fp8_margin};
}

ParallelLayout parallel_layout(const Config& c, int world_size) {
  const ParallelLayout layout(c.parallel, world_size);
  const int64_t per_step = int64_t{c.train.micro_batch} * layout.dp();
  if (c.train.global_batch % per_step != 0)
    fail(fmt::format("train.global_batch={} is not a multiple of train.micro_batch={} x {} "
                     "data-parallel ranks = {}",
                     c.train.global_batch, c.train.micro_batch, layout.dp(), per_step));
  return layout;
}

int micro_batches_per_step(const Config& config, const ParallelLayout& layout) {
  return static_cast<int>(config.train.global_batch / (int64_t{config.train.micro_batch} * layout.dp()));
}

PipelinePlacement pipeline_placement(const Config& config, const ParallelLayout& layout) {
  return {layout.pp(), stage_chunk_count(config.parallel), v_shaped(config.parallel)};
}

std::vector<PipelineChunk> virtual_stages(const Config& config, const ParallelLayout& layout) {
  const int pp = layout.pp(), chunks = stage_chunk_count(config.parallel), stages = pp * chunks;
  const ParallelConfig& p = config.parallel;
  const std::vector<int> layers =
      pipeline_layers(config.model.n_layer, pp, chunks, p.first_stage_layers, p.last_stage_layers);
  std::vector<PipelineChunk> virtual_stage;
  int first_layer = 0;
  for (int v = 0; v < stages; ++v) {
    const int n = layers[static_cast<size_t>(v)];
    virtual_stage.push_back({first_layer, first_layer + n, v == 0, v == stages - 1});
    first_layer += n;
  }
  return virtual_stage;
}

std::vector<PipelineChunk> stage_chunks(const Config& config, const ParallelLayout& layout, int stage) {
  if (layout.pp() == 1) return {};
  const PipelinePlacement at = pipeline_placement(config, layout);
  const std::vector<PipelineChunk> all = virtual_stages(config, layout);
  std::vector<PipelineChunk> chunks;
  for (int c = 0; c < at.chunks; ++c) chunks.push_back(all[static_cast<size_t>(at.stage_of(stage, c))]);
  return chunks;
}

namespace {
bool zero_bubble(const Config& config, const ParallelLayout& layout) {
  return splits_backward(config.parallel) && layout.pp() > 1;
}
}  // namespace

std::vector<PipelineSchedule> pipeline_schedules(const Config& config, const ParallelLayout& layout) {
  const int pp = layout.pp(), m = micro_batches_per_step(config, layout);
  std::vector<PipelineSchedule> ranks;
  if (!zero_bubble(config, layout)) {
    for (int stage = 0; stage < pp; ++stage) ranks.push_back(pipeline_schedule(pp, layout.vpp(), stage, m));
    return ranks;
  }
  ranks = config.parallel.schedule == "dualpipev"
              ? dualpipev_schedules(pp, m)
              : zero_bubble_schedules(v_shaped(config.parallel) ? ZeroBubble::V : ZeroBubble::H1, pp, m);
  check_pipeline_schedules(ranks, pipeline_placement(config, layout), m);
  return ranks;
}

PipelineSchedule stage_schedule(const Config& config, const ParallelLayout& layout, int stage) {
  if (!zero_bubble(config, layout))
    return pipeline_schedule(layout.pp(), layout.vpp(), stage, micro_batches_per_step(config, layout));
  return pipeline_schedules(config, layout)[static_cast<size_t>(stage)];
}

double schedule_bubble(const Config& config, const ParallelLayout& layout) {
  // The planner asks for the bubbles of thousands of layouts that share a few schedules (the
  // kind, pp, vpp and micro-batches fix one): each is played out once and kept, at most
  // kMaxPlayed of them (then all are dropped and played again as asked).
  constexpr size_t kMaxPlayed = 1024;
  static std::mutex mutex;
  static std::map<std::tuple<std::string, int, int, int>, double> played;
  const int m = micro_batches_per_step(config, layout);
  const auto key = std::make_tuple(config.parallel.schedule, layout.pp(), layout.vpp(), m);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = played.find(key); it != played.end()) return it->second;
  }
  const double bubble = play_pipeline(pipeline_schedules(config, layout), pipeline_placement(config, layout), m).bubble();
  const std::lock_guard<std::mutex> lock(mutex);
  if (played.size() >= kMaxPlayed) played.clear();
  played[key] = bubble;
  return bubble;
}

int activation_slots(const Config& config, const ParallelLayout& layout, int stage) {
  if (layout.pp() == 1) return 1;
  return pipeline_slots(stage_schedule(config, layout, stage));
}

ModelSplit rank_model_split(const Config& config, const ParallelLayout& layout, const RankGroups& groups, int stage) {
  // The distributed optimizer keeps 1/(dp cp) of the state on each rank, 1/edp of the
  // experts'; sharded further, the gradients and values are laid out in units over the
  // same ranks.
  const ShardLevel shard = shard_level(config.parallel);
  const bool distributed = shard >= ShardLevel::Optimizer;
  ModelSplit split;
  split.recompute = parse_recompute(config.train.recompute);
  split.tensor = groups.tensor;
  split.flat_shards = distributed && groups.gradient ? groups.sharded_over()->size() : 1;
  split.expert_shards = distributed ? layout.edp() : 1;
  split.shard_units = shard >= ShardLevel::Gradients && split.flat_shards > 1;
  split.flat_shard_rank = split.shard_units ? groups.sharded_over()->rank() : 0;
  split.expert_shard_rank = split.shard_units && groups.expert_data ? groups.expert_data->rank() : 0;
  split.shard_values = split.shard_units && shard == ShardLevel::Parameters;
  split.shard_per_step = config.parallel.shard_per_step;
  split.sequence_parallel = config.parallel.sequence_parallel;
  split.split_backward = zero_bubble(config, layout);
  split.chunks = stage_chunks(config, layout, stage);
  if (layout.pp() > 1) {
    const PipelineSchedule schedule = stage_schedule(config, layout, stage);
    for (int c = 0; c < static_cast<int>(split.chunks.size()); ++c)
      split.chunk_slots.push_back(pipeline_slots(schedule, c));
  }
  split.expert = groups.expert;
  split.context = groups.context;
  split.whole_experts = layout.whole_experts();
  split.fp8 = fp8_recipe(config.precision);
  return split;
}

OptimizerGroups rank_optimizer_groups(const Config& config, const ParallelLayout& layout, const RankGroups& groups) {
  OptimizerGroups optimizer;
  const bool sharded =
      shard_level(config.parallel) >= ShardLevel::Optimizer && groups.gradient && groups.sharded_over()->size() > 1;
  optimizer.shard = sharded ? groups.sharded_over() : nullptr;
  optimizer.shard_replicas = sharded ? groups.shard_replicas : nullptr;
  optimizer.expert_shard = groups.expert_data;
  optimizer.tensor = groups.tensor;
  optimizer.pipeline = layout.pp() > 1 ? groups.pipeline : nullptr;
  optimizer.expert = groups.expert;
  optimizer.whole_experts = layout.whole_experts();
  return optimizer;
}

}  // namespace kiln
