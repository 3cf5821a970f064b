#include "trainer/train/step_runner.h"

#include <algorithm>
#include <utility>

#include <fmt/core.h>

#include "trainer/parallel/device_world.h"
#include "trainer/plan/rank_build.h"
#include "trainer/train/cuda_graph_choice.h"
#include "trainer/util/step_clock.h"

namespace kiln {

StepRunner::StepRunner(const Config& config, const ParallelLayout& layout, RankCoordinates coordinates,
                       RankBackend& backend, TrainingData& data, GptModel& model, AdamW& optimizer,
                       PipelineSchedule schedule)
    : config_(config),
      layout_(layout),
      coordinates_(coordinates),
      backend_(backend),
      data_(data),
      model_(model),
      optimizer_(optimizer),
      accum_(micro_batches_per_step(config, layout)),
      schedule_(std::move(schedule)),
      pipeline_(model, backend.pipeline_group(), pipeline_placement(config, layout)),
      loss_scaler_(config.precision.dtype == "fp16" ? LossScaler::dynamic() : LossScaler::none()) {
  Ops& ops = backend_.ops();
  // Without the distributed optimizer the replicas sum the dense region in buckets during
  // backward; the experts' region is summed over its own replicas after it.
  const ParameterSet& params = model_.parameters();
  if (gradient_group().size() > 1 && !optimizer_.sharded())
    buckets_ = std::make_unique<GradientBuckets>(
        gradient_group(), params.flat_grads().slice(0, params.dense_size()), config_.parallel.ddp_bucket_size);
  if (!params.units().empty())
    units_ = std::make_unique<ShardedUnits>(model_, optimizer_, backend_.shard_group(), backend_.shard_replica_group(),
                                            backend_.expert_data_group(), config_.parallel.shard_prefetch);
  // The device communicator matters to the choice only between GPU ranks.
  const bool gpu_ranks = ops.device() == Device::Cuda && layout_.world() > 1;
  const CudaGraphChoice graphs = choose_cuda_graphs(
      config_, layout_, ops.device(), gpu_ranks ? resolve_device_comm(config_.parallel.device_comm) : "");
  if (graphs.use) {
    DocumentOptions documents;
    documents.reset_position_ids = config_.data.reset_position_ids;
    documents.reset_attention_mask = config_.data.reset_attention_mask;
    device_step_ = std::make_unique<DeviceStep>(model_, optimizer_, ops, accum_, documents);
  } else {
    graphs_why_not_ = graphs.why_not;
  }
}

void StepRunner::resume_at(int64_t consumed_samples, const LossScaler::State& loss_scaler) {
  consumed_samples_ = consumed_samples;
  loss_scaler_.restore(loss_scaler);
}

StepOutcome StepRunner::run(int64_t step, bool timed, double lr, std::FILE* out) {
  const double scale = loss_scaler_.scale();
  std::optional<StepOutcome> replayed;
  if (device_step_ && steps_run_++ >= kGraphWarmupSteps) replayed = replay_step(step, lr, out);
  StepOutcome outcome;
  if (replayed) {
    outcome = *replayed;
  } else {
    outcome.times = train_step(timed);
    const Clock::time_point opt_start = Clock::now();
    outcome.update = optimizer_.step(lr, gradient_divisor(scale, outcome.times.trained_tokens));
    if (timed) backend_.ops().synchronize();
    outcome.opt_ms = ms_since(opt_start);
  }
  outcome.loss_scale = scale;
  consumed_samples_ += config_.train.global_batch;
  loss_scaler_.update(outcome.update.skipped);
  model_.update_fp8_scales();
  return outcome;
}

std::optional<StepOutcome> StepRunner::replay_step(int64_t step, double lr, std::FILE* out) {
  const TrainConfig& t = config_.train;
  const int64_t B = t.micro_batch, first = first_sample();
  StepOutcome outcome;
  StepTimes& times = outcome.times;
  Clock::time_point start = Clock::now();
  for (int micro = 0; micro < accum_; ++micro) {
    const TokenBatch& batch = data_.read(data_.train(), first + micro * B);
    device_step_->stage(micro, batch.tokens(), batch.targets(), {batch.positions(), batch.attention_starts()});
    times.trained_tokens += batch.trained_targets();
  }
  times.data_ms = ms_since(start);
  start = Clock::now();
  const double scale = loss_scaler_.scale();
  const double tokens_per_step = static_cast<double>(t.global_batch) * config_.model.seq_len;
  // One rank alone replays (cuda_graph_choice.h): its tokens are the step's.
  const std::optional<DeviceStep::Result> result = device_step_->run(
      lr, gradient_divisor(scale, times.trained_tokens), scale / tokens_per_step, /*captured=*/true);
  if (!result) {
    fmt::print(out, "kiln: CUDA graphs: off from step {}: the step cannot be captured ({}); it runs op by op\n",
               step, device_step_->why_not());
    std::fflush(out);
    device_step_.reset();
    return std::nullopt;
  }
  // One replay holds forward, backward and the optimizer: its time is counted as the
  // forward's (docs/gpu.md#cuda-graphs). The results were read back: the device is done.
  times.fwd_ms = ms_since(start);
  times.loss = result->nats / static_cast<double>(std::max<int64_t>(times.trained_tokens, 1));
  outcome.update = result->update;
  return outcome;
}

int64_t StepRunner::first_sample() const {
  // This replica's slice of the step's global batch (a tensor group's ranks read the same).
  return consumed_samples_ + coordinates_.dp * int64_t{accum_} * config_.train.micro_batch;
}

StepTimes StepRunner::train_step(bool timed) {
  const int64_t first = first_sample();
  // On a logged step each phase waits for the device, so the host clock times the device.
  const auto phase_end = [&] {
    if (timed) backend_.ops().synchronize();
  };
  StepTimes times;
  model_.zero_grad();
  if (units_) {
    const Clock::time_point start = Clock::now();
    units_->begin_step();
    times.comm_ms += ms_since(start);
  }
  pipeline_step(first, phase_end, times);
  if (units_) times.shard_ms = units_->take_waited_ms();
  // The tied embedding's copies are summed over the first and last stages once each has
  // its replicas' sum (Megatron's order): the buckets write the sums in place, the
  // distributed optimizer into shards of its own, so it takes the copies summed first.
  const bool sharded = optimizer_.sharded();
  if (sharded) sum_tied_embedding(times);
  if (has_replicas()) reduce_gradients(times);
  if (!sharded) sum_tied_embedding(times);
  return times;
}

double StepRunner::gradient_divisor(double scale, int64_t trained_tokens) const {
  const double tokens_per_step = static_cast<double>(config_.train.global_batch) * config_.model.seq_len;
  return scale * (static_cast<double>(std::max<int64_t>(trained_tokens, 1)) / tokens_per_step);
}

void StepRunner::sum_losses(StepTimes& times, std::vector<double> sums) {
  Communicator& replicas = backend_.data_group();
  if (replicas.size() > 1) {
    const Clock::time_point start = Clock::now();
    sums.push_back(static_cast<double>(times.trained_tokens));
    replicas.all_reduce(Tensor{sums.data(), DType::F64, {static_cast<int64_t>(sums.size())}}, ReduceOp::Sum);
    times.trained_tokens = static_cast<int64_t>(sums.back());
    sums.pop_back();
    times.comm_ms += ms_since(start);
  }
  times.loss = sums[0] / static_cast<double>(std::max<int64_t>(times.trained_tokens, 1));
  const size_t depths = (sums.size() - 1) / 2;
  times.mtp_losses.clear();
  for (size_t k = 0; k < depths; ++k) times.mtp_losses.push_back(sums[1 + k] / std::max(sums[1 + depths + k], 1.0));
}

void StepRunner::pipeline_step(int64_t first_sample, const std::function<void()>& phase_end, StepTimes& times) {
  const int64_t B = config_.train.micro_batch;
  const double tokens_per_step =
      static_cast<double>(config_.train.global_batch) * config_.model.seq_len;
  // The summed losses of this replica's trained tokens; then multi-token prediction's, depth by
  // depth: the summed losses, then the targets' counts.
  const size_t depths = static_cast<size_t>(config_.model.mtp_depth);
  std::vector<double> sums(1 + 2 * depths, 0.0);
  const PipelineTimes pipeline = pipeline_.run(
      schedule_, loss_scaler_.scale() / tokens_per_step,
      [&](int micro, int slot) {
        data_.fill(model_, data_.train(), first_sample + micro * B, slot);
        times.trained_tokens += data_.trained_targets();
      },
      [&](int, int slot, double loss) {
        sums[0] += loss * static_cast<double>(model_.target_count(slot));
        // Only the chunk with the head has the modules.
        const std::vector<double>& depth_sums = model_.mtp_loss_sums(slot);
        for (size_t k = 0; k < depth_sums.size(); ++k) {
          sums[1 + k] += depth_sums[k];
          sums[1 + depths + k] += static_cast<double>(model_.mtp_target_counts(slot)[k]);
        }
      },
      phase_end,
      // The data-parallel reduction of each bucket starts as the last micro-batch's
      // backward finishes it (during the pipeline's cool-down).
      buckets_ ? std::function<void(int64_t)>([this](int64_t ready) { buckets_->ready(ready); })
               : nullptr);
  times.data_ms = pipeline.data_ms;
  times.fwd_ms = pipeline.fwd_ms;
  times.bwd_ms = pipeline.bwd_ms;
  Communicator& stages = backend_.pipeline_group();
  if (stages.size() > 1) {
    times.pipe_ms = pipeline.wait_ms;
    const Clock::time_point start = Clock::now();
    // The losses are the last stage's; every stage reports them (each read the same batches).
    stages.all_reduce(Tensor{sums.data(), DType::F64, {static_cast<int64_t>(sums.size())}}, ReduceOp::Sum);
    times.comm_ms += ms_since(start);
  }
  sum_losses(times, std::move(sums));
}

void StepRunner::sum_tied_embedding(StepTimes& times) {
  Communicator* embedding_group = backend_.embedding_group();
  if (!embedding_group || model_.parameters().find("wte").frozen) return;
  const Clock::time_point start = Clock::now();
  // The output layer's copy of the embedding took the head's gradient, the embedding the
  // input's: both copies take the sum, so they stay equal.
  embedding_group->all_reduce(model_.parameters().find("wte").grad, ReduceOp::Sum);
  times.comm_ms += ms_since(start);
}

void StepRunner::reduce_gradients(StepTimes& times) {
  const Clock::time_point start = Clock::now();
  // Each rank's backward weighted its tokens by 1 / (the global batch's tokens), so the sum
  // over ranks is the global batch's gradient, as one process computes it. What is left of
  // the reduction after backward is the exposed communication.
  if (units_) {
    units_->end_step();
  } else if (optimizer_.sharded()) {
    optimizer_.reduce_scatter_gradients();
  } else {
    if (buckets_) buckets_->finish();
    // The experts' gradients are summed over the replicas that hold the same experts.
    const ParameterSet& params = model_.parameters();
    Communicator* expert_data_group = backend_.expert_data_group();
    if (expert_data_group && expert_data_group->size() > 1)
      expert_data_group->all_reduce(params.flat_grads().slice(params.dense_size(), params.size()),
                                    ReduceOp::Sum);
  }
  times.comm_ms += ms_since(start);
}

bool StepRunner::has_replicas() const {
  const Communicator* expert_data_group = backend_.expert_data_group();
  return gradient_group().size() > 1 || (expert_data_group && expert_data_group->size() > 1);
}

std::pair<double, double> StepRunner::evaluate() {
  const int64_t B = config_.train.micro_batch;
  double nats = 0;
  int64_t bytes = 0, targets = 0;
  const int iters = config_.train.eval_iters;
  if (units_) units_->gather_whole_step();
  pipeline_.run(
      pipeline_forwards(model_.chunks(), iters), 0.0,
      [&](int micro, int slot) {
        data_.fill(model_, *data_.valid(), micro * B, slot);
        bytes += data_.target_text_bytes();
      },
      [&](int, int slot, double batch_loss) {
        nats += batch_loss * static_cast<double>(model_.target_count(slot));
        targets += model_.target_count(slot);
      });
  Communicator& stages = backend_.pipeline_group();
  if (stages.size() > 1) {
    // The losses are the last stage's.
    double sums[] = {nats, static_cast<double>(targets)};
    stages.all_reduce(Tensor{sums, DType::F64, {2}}, ReduceOp::Sum);
    nats = sums[0];
    targets = static_cast<int64_t>(sums[1]);
  }
  // Over the trained (unmasked) targets, as training's loss.
  return {nats / static_cast<double>(std::max<int64_t>(targets, 1)),
          nats / static_cast<double>(std::max<int64_t>(bytes, 1))};
}

}  // namespace kiln
