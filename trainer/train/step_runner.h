// Runs one global batch through this rank's part of the model: its micro-batches through the
// stage's schedule by the pipeline executor (one rank without pipelining is the one-stage
// schedule: forward and backward of each micro-batch in turn), the gradients summed over the
// replicas, then the optimizer's update at the step's learning rate; or, with CUDA graphs,
// the same step replayed from one capture (docs/gpu.md#cuda-graphs). It times each phase and
// keeps the data position and the loss scale. Validation's forwards go the same way.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/parallel/gradient_buckets.h"
#include "trainer/parallel/layout.h"
#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/train/device_step.h"
#include "trainer/train/pipeline_executor.h"
#include "trainer/train/rank_backend.h"
#include "trainer/train/sharded_units.h"
#include "trainer/train/step_times.h"
#include "trainer/train/training_data.h"

namespace kiln {

struct StepOutcome {
  StepTimes times;
  OptimizerStep update;
  double opt_ms = 0;
  double loss_scale = 1;  // the scale the step's backward ran at
};

class StepRunner {
 public:
  // schedule: this stage's (pipeline_schedule.h; at pp 1 each micro-batch's forward and
  // backward in turn). Opens the pipeline's channels (collective over the pipeline group)
  // and, without the distributed optimizer and with several replicas, the gradient buckets;
  // with the parameters sharded in units, their gathers and reductions (sharded_units.h).
  StepRunner(const Config& config, const ParallelLayout& layout, RankCoordinates coordinates, RankBackend& backend,
             TrainingData& data, GptModel& model, AdamW& optimizer, PipelineSchedule schedule);

  // One step and its optimizer update at learning rate lr; the loss scale and the data
  // position move on. Replayed as a CUDA graph once warmed up where the run allows it
  // (after a line on `out` when a capture fails and the run steps op by op from then on).
  StepOutcome run(int64_t step, bool timed, double lr, std::FILE* out);
  // Mean validation loss per token, and per byte of the target tokens' text.
  std::pair<double, double> evaluate();

  int micro_batches() const { return accum_; }
  const PipelineSchedule& schedule() const { return schedule_; }
  const LossScaler& loss_scaler() const { return loss_scaler_; }
  // Training samples read so far: the data position.
  int64_t consumed_samples() const { return consumed_samples_; }
  // A resumed run's data position and loss scale.
  void resume_at(int64_t consumed_samples, const LossScaler::State& loss_scaler);
  // With CUDA graphs: the step captured once and replayed; null when the run does not allow
  // it (graphs_why_not says why) or a capture failed.
  const DeviceStep* device_step() const { return device_step_.get(); }
  const std::string& graphs_why_not() const { return graphs_why_not_; }

 private:
  // The replayed step; nullopt when it cannot be captured, after a line saying why.
  std::optional<StepOutcome> replay_step(int64_t step, double lr, std::FILE* out);
  // The first sample of the coming step that this data-parallel replica reads.
  int64_t first_sample() const;
  StepTimes train_step(bool timed);
  // The stage's part of the step's micro-batches (from first_sample on), then the loss
  // shared by every stage.
  void pipeline_step(int64_t first_sample, const std::function<void()>& phase_end, StepTimes& times);
  // With tied embeddings over several stages: the gradients of the first stage's embedding
  // and of the last stage's copy, summed over the two.
  void sum_tied_embedding(StepTimes& times);
  // Sums the replicas' gradients over the data-parallel ranks, and the experts' over the
  // ranks that hold the same experts.
  void reduce_gradients(StepTimes& times);
  // Whether any gradient has replicas to sum: data-parallel ones, or whole experts' tensor
  // ranks (each routed its own tokens) with no data parallelism at all.
  bool has_replicas() const;
  // The step's loss: the replicas' summed losses over their trained tokens, and those tokens;
  // and multi-token prediction's, each depth's summed losses over its targets. sums: this
  // replica's summed losses, then the depths' summed losses, then their targets' counts, summed
  // over the replicas with the trained tokens in one all-reduce.
  void sum_losses(StepTimes& times, std::vector<double> sums);
  // What the optimizer divides the gradients by: backward weighted every token by
  // loss scale / (global batch x seq_len), so this makes the gradient the mean over the trained
  // tokens (Megatron's per-token loss), the same as before wherever every token is trained.
  double gradient_divisor(double scale, int64_t trained_tokens) const;
  Communicator& gradient_group() const { return backend_.gradient_group(); }

  const Config& config_;
  const ParallelLayout& layout_;
  RankCoordinates coordinates_;  // this rank's place in the layout
  RankBackend& backend_;
  TrainingData& data_;
  GptModel& model_;
  AdamW& optimizer_;
  int accum_ = 1;  // micro-batches per step on each rank
  PipelineSchedule schedule_;  // this stage's
  PipelineExecutor pipeline_;
  std::unique_ptr<GradientBuckets> buckets_;  // with several data-parallel ranks
  std::unique_ptr<ShardedUnits> units_;       // parallel.shard=gradients or parameters
  std::unique_ptr<DeviceStep> device_step_;
  std::string graphs_why_not_;
  int64_t steps_run_ = 0;  // by this process: the warm-up before a capture
  LossScaler loss_scaler_;
  int64_t consumed_samples_ = 0;
};

}  // namespace kiln
