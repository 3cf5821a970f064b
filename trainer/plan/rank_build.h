// What one rank of a layout builds, from the config, the layout and the rank's groups: the
// virtual stages it holds, the activation slots its schedule keeps, the model's split and the
// optimizer's groups. The trainer builds its rank over the groups it joined; the planner
// over groups of the same sizes that move nothing, so that a plan's memory is what the
// trainer allocates. It lives with the planner, below the training loop, so both include it
// and the planner includes nothing of trainer/train/.
#pragma once

#include <optional>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/model/model_split.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/layout.h"
#include "trainer/parallel/pipeline_schedule.h"

namespace kiln {

// A rank's groups; null where the layout has no such split.
struct RankGroups {
  Communicator* tensor = nullptr;       // tp > 1
  Communicator* gradient = nullptr;     // the data and context ranks that sum the gradients
  Communicator* pipeline = nullptr;     // pp > 1
  Communicator* context = nullptr;      // cp > 1
  Communicator* expert = nullptr;       // the experts' layout (ParallelLayout::expert_layout)
  Communicator* expert_data = nullptr;  // likewise
  // parallel.shard_group below the gradient ranks: the ranks that share the sharded state,
  // and this rank's replicas in the other shard groups (ParallelLayout::shard_group).
  Communicator* shard = nullptr;
  Communicator* shard_replicas = nullptr;
  // The ranks the state is sharded over: the shard group, else the gradient group.
  Communicator* sharded_over() const { return shard ? shard : gradient; }
};

// precision.dtype as the model computes on `device`: F32, BF16 or F16; fp8 computes in BF16
// on a GPU and F32 on the CPU around its FP8 products.
DType compute_dtype(const PrecisionConfig& precision, Device device);
// The FP8 recipe of precision.dtype=fp8 (its fp8_* keys); empty for any other dtype.
std::optional<Fp8Recipe> fp8_recipe(const PrecisionConfig& precision);
// Micro-batches each data-parallel rank runs a step: global batch / (micro-batch x dp).
int micro_batches_per_step(const Config& config, const ParallelLayout& layout);

// Tensor (with sequence), pipeline and data parallelism over `world_size` processes, as the
// trainer runs them. A world the parallel section does not divide, or a global batch the
// data-parallel ranks' micro-batches do not divide, is a kiln::Error saying so.
ParallelLayout parallel_layout(const Config& config, int world_size);
// Where the virtual stages sit: dealt round the stages (vpp of them each), or two a stage in a
// V under parallel.schedule=zbv|dualpipev.
PipelinePlacement pipeline_placement(const Config& config, const ParallelLayout& layout);
// The model's virtual stages in model order (one stage, the whole model, at pp 1).
std::vector<PipelineChunk> virtual_stages(const Config& config, const ParallelLayout& layout);
// The virtual stages pipeline stage `stage` holds (empty at pp 1: the whole model).
std::vector<PipelineChunk> stage_chunks(const Config& config, const ParallelLayout& layout, int stage);
// What each pipeline stage runs in a step, by parallel.schedule: Megatron's 1F1B (or its
// interleaved form), ZB-H1 or ZBV (trainer/parallel/zero_bubble_schedule.h), or DualPipeV
// (dualpipev_schedule.h), whose schedules pass check_pipeline_schedules first. Interleaving
// and DualPipeV refuse a step they cannot schedule.
std::vector<PipelineSchedule> pipeline_schedules(const Config& config, const ParallelLayout& layout);
// Pipeline stage `stage`'s.
PipelineSchedule stage_schedule(const Config& config, const ParallelLayout& layout, int stage);
// The fraction of a step the pipeline's ranks idle under that schedule, from the schedules
// played out (pipeline_timeline.h).
double schedule_bubble(const Config& config, const ParallelLayout& layout);
// The micro-batches the stage keeps in flight at once: its schedule's widest span (under the
// zero-bubble schedules until a micro-batch's weights' gradient); each of its chunks keeps
// its activations in slots of its own (ModelSplit::chunk_slots, from rank_model_split).
int activation_slots(const Config& config, const ParallelLayout& layout, int stage);
ModelSplit rank_model_split(const Config& config, const ParallelLayout& layout, const RankGroups& groups, int stage);
OptimizerGroups rank_optimizer_groups(const Config& config, const ParallelLayout& layout, const RankGroups& groups);

}  // namespace kiln
