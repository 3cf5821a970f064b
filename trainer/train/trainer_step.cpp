// One training step (and validation's forwards) of the Trainer: micro-batches through the
// model, or through the pipeline's schedule, then the gradients summed over the replicas and
// the optimizer's update; or, with CUDA graphs, the same step replayed from one capture.
#include <algorithm>
#include <functional>
#include <utility>

#include <fmt/core.h>

#include "trainer/util/step_clock.h"
#include "trainer/train/trainer.h"

namespace kiln {

Trainer::StepOutcome Trainer::run_step(int64_t step, bool timed, double lr) {
  if (device_step_ && steps_run_++ >= kGraphWarmupSteps)
    if (std::optional<StepOutcome> replayed = replay_step(step, lr)) return *replayed;
  StepOutcome outcome;
  outcome.times = train_step(timed);
  const Clock::time_point opt_start = Clock::now();
  outcome.update = optimizer_->step(lr, loss_scaler_.scale());
  if (timed) ops_->synchronize();
  outcome.opt_ms = ms_since(opt_start);
  return outcome;
}

std::optional<Trainer::StepOutcome> Trainer::replay_step(int64_t step, double lr) {
  const TrainConfig& t = config_.train;
  const int64_t B = t.micro_batch, first = first_sample();
  StepOutcome outcome;
  StepTimes& times = outcome.times;
  Clock::time_point start = Clock::now();
  for (int micro = 0; micro < accum_; ++micro) {
    batch_->fill(*train_data_, first + micro * B, B, config_.model.seq_len);
    device_step_->stage(micro, batch_->tokens(), batch_->targets(),
                        {batch_->positions(), batch_->attention_starts()});
  }
  times.data_ms = ms_since(start);
  start = Clock::now();
  const double scale = loss_scaler_.scale();
  const double tokens_per_step = static_cast<double>(t.global_batch) * config_.model.seq_len;
  const std::optional<DeviceStep::Result> result =
      device_step_->run(lr, scale, scale / tokens_per_step, /*captured=*/true);
  if (!result) {
    fmt::print(out_, "kiln: CUDA graphs: off from step {}: the step cannot be captured ({}); it runs op by op\n",
               step, device_step_->why_not());
    std::fflush(out_);
    device_step_.reset();
    return std::nullopt;
  }
  // One replay holds forward, backward and the optimizer: its time is counted as the
  // forward's (docs/gpu.md#cuda-graphs). The results were read back: the device is done.
  times.fwd_ms = ms_since(start);
  times.loss = result->loss;
  outcome.update = result->update;
  return outcome;
}

int64_t Trainer::first_sample() const {
  // This replica's slice of the step's global batch (a tensor group's ranks read the same).
  return consumed_samples_ + coordinates_.dp * int64_t{accum_} * config_.train.micro_batch;
}

void Trainer::fill_batch(const SampleSource& data, int64_t first_sample, int slot) {
  const int64_t B = config_.train.micro_batch, T = config_.model.seq_len;
  batch_->fill(data, first_sample, B, static_cast<int>(T));
  model_->set_batch(batch_->tokens(), batch_->targets(), B, T, slot,
                    {batch_->positions(), batch_->attention_starts()});
}

StepTimes Trainer::train_step(bool timed) {
  const int accum = accum_;
  const int64_t B = config_.train.micro_batch;
  const int64_t first = first_sample();
  const double tokens_per_step =
      static_cast<double>(config_.train.global_batch) * config_.model.seq_len;
  // On a logged step each phase waits for the device, so the host clock times the device.
  const auto phase_end = [&] {
    if (timed) ops_->synchronize();
  };
  StepTimes times;
  model_->zero_grad();
  if (layout_.pp() > 1) {
    pipeline_step(first, phase_end, times);
    // The tied embedding's copies are summed over the first and last stages once each has
    // its replicas' sum (Megatron's order): the buckets write the sums in place, the
    // distributed optimizer into shards of its own, so it takes the copies summed first.
    const bool sharded = optimizer_->sharded();
    if (sharded) sum_tied_embedding(times);
    if (gradient_group().size() > 1) reduce_gradients(times);
    if (!sharded) sum_tied_embedding(times);
    return times;
  }
  for (int micro = 0; micro < accum; ++micro) {
    Clock::time_point t0 = Clock::now();
    fill_batch(*train_data_, first + micro * B);
    phase_end();
    times.data_ms += ms_since(t0);
    t0 = Clock::now();
    times.loss += model_->forward() / accum;
    phase_end();
    times.fwd_ms += ms_since(t0);
    t0 = Clock::now();
    // The last micro-batch's backward finishes the step's gradients, layer by layer: each
    // bucket's reduction over the data-parallel ranks starts as its layers are done.
    if (buckets_ && micro == accum - 1)
      model_->backward(loss_scaler_.scale() / tokens_per_step, 0,
                       [this](int64_t ready) { buckets_->ready(ready); });
    else
      model_->backward(loss_scaler_.scale() / tokens_per_step);
    phase_end();
    times.bwd_ms += ms_since(t0);
  }
  if (gradient_group().size() > 1) reduce_gradients(times);
  return times;
}

void Trainer::pipeline_step(int64_t first_sample, const std::function<void()>& phase_end,
                            StepTimes& times) {
  const int64_t B = config_.train.micro_batch;
  const double tokens_per_step =
      static_cast<double>(config_.train.global_batch) * config_.model.seq_len;
  const PipelineTimes pipeline = pipeline_->run(
      schedule_, loss_scaler_.scale() / tokens_per_step,
      [&](int micro, int slot) { fill_batch(*train_data_, first_sample + micro * B, slot); },
      [&](int, int, double loss) { times.loss += loss / accum_; }, phase_end,
      // The data-parallel reduction of each bucket starts as the last micro-batch's
      // backward finishes it, during the pipeline's cool-down.
      buckets_ ? std::function<void(int64_t)>([this](int64_t ready) { buckets_->ready(ready); })
               : nullptr);
  times.data_ms = pipeline.data_ms;
  times.fwd_ms = pipeline.fwd_ms;
  times.bwd_ms = pipeline.bwd_ms;
  const Clock::time_point start = Clock::now();
  // The loss is the last stage's; every stage reports it.
  pipeline_group_->all_reduce(Tensor{&times.loss, DType::F64, {1}}, ReduceOp::Sum);
  times.comm_ms += ms_since(start);
}

void Trainer::sum_tied_embedding(StepTimes& times) {
  if (!embedding_group_) return;
  const Clock::time_point start = Clock::now();
  // The output layer's copy of the embedding took the head's gradient, the embedding the
  // input's: both copies take the sum, so they stay equal.
  embedding_group_->all_reduce(model_->parameters().find("wte").grad, ReduceOp::Sum);
  times.comm_ms += ms_since(start);
}

void Trainer::reduce_gradients(StepTimes& times) {
  const Clock::time_point start = Clock::now();
  // Each rank's backward weighted its tokens by 1 / (the global batch's tokens), so the sum
  // over ranks is the global batch's gradient, as one process computes it. What is left of
  // the reduction after backward is the exposed communication.
  if (optimizer_->sharded()) {
    optimizer_->reduce_scatter_gradients();
  } else {
    buckets_->finish();
    // The experts' gradients are summed over the replicas that hold the same experts.
    const ParameterSet& params = model_->parameters();
    if (expert_data_group_ && expert_data_group_->size() > 1)
      expert_data_group_->all_reduce(params.flat_grads().slice(params.dense_size(), params.size()),
                                     ReduceOp::Sum);
  }
  double loss = times.loss;
  data_group_->all_reduce(Tensor{&loss, DType::F64, {1}}, ReduceOp::Sum);
  times.loss = loss / layout_.dp();
  times.comm_ms += ms_since(start);
}

std::pair<double, double> Trainer::evaluate() {
  const int64_t B = config_.train.micro_batch;
  double loss = 0, nats = 0;
  int64_t bytes = 0;
  const int iters = config_.train.eval_iters;
  if (layout_.pp() > 1) {
    pipeline_->run(
        pipeline_forwards(layout_.vpp(), iters), 0.0,
        [&](int micro, int slot) {
          fill_batch(*valid_data_, micro * B, slot);
          bytes += batch_->target_text_bytes(token_bytes_);
        },
        [&](int, int slot, double batch_loss) {
          loss += batch_loss;
          nats += batch_loss * static_cast<double>(model_->target_count(slot));
        });
    // The losses are the last stage's.
    double sums[] = {loss, nats};
    pipeline_group_->all_reduce(Tensor{sums, DType::F64, {2}}, ReduceOp::Sum);
    loss = sums[0];
    nats = sums[1];
  } else {
    for (int64_t i = 0; i < iters; ++i) {
      fill_batch(*valid_data_, i * B);
      const double batch_loss = model_->forward();
      loss += batch_loss;
      nats += batch_loss * static_cast<double>(model_->target_count());
      bytes += batch_->target_text_bytes(token_bytes_);
    }
  }
  return {loss / static_cast<double>(config_.train.eval_iters),
          nats / static_cast<double>(std::max<int64_t>(bytes, 1))};
}

}  // namespace kiln
