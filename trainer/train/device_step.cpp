#include "trainer/train/device_step.h"

#include <cstring>
#include <span>

#include "base/check.h"
#include "trainer/memory/host_copy.h"

namespace kiln {

namespace {
constexpr int kParts = 4;  // tokens, targets, positions, attention starts
}  // namespace

DeviceStep::DeviceStep(GptModel& model, AdamW& optimizer, Ops& ops, int accum, const DocumentOptions& documents)
    : model_(model),
      optimizer_(optimizer),
      ops_(ops),
      accum_(accum),
      rows_(model.micro_batch()),
      columns_(model.config().seq_len),
      positions_(documents.reset_position_ids),
      starts_(documents.reset_attention_mask) {
  KILN_CHECK(!optimizer_.norm_over_ranks(), "a step captured as a graph needs the whole gradient norm on one rank");
  const Shape shape{accum_, rows_ * columns_};
  // Per-token losses in the gradients' dtype (F32; F64 in a model computing in F64).
  const DType dtype = model_.parameters().grad_dtype();
  losses_ = memory_.take(shape, dtype);
  memory_.allocate(ops_);
  losses_ = memory_.take(shape, dtype);
  memory_.check_complete();
  staging_bytes_ = static_cast<size_t>(accum_) * kParts * static_cast<size_t>(rows_ * columns_) * sizeof(int32_t);
  staging_ = static_cast<int32_t*>(ops_.allocate_host(staging_bytes_));
}

DeviceStep::~DeviceStep() {
  graph_.reset();
  ops_.release_host(staging_);
}

int32_t* DeviceStep::staged(int micro, int part) const {
  return staging_ + (static_cast<int64_t>(micro) * kParts + part) * rows_ * columns_;
}

void DeviceStep::stage(int micro, const int32_t* tokens, const int32_t* targets, const DocumentResets& resets) {
  KILN_CHECK(micro >= 0 && micro < accum_, "stage: micro-batch " + std::to_string(micro) + " of " + std::to_string(accum_));
  KILN_CHECK(targets && (resets.positions != nullptr) == positions_ && (resets.attention_starts != nullptr) == starts_,
             "stage: a training batch with targets and the resets the step was laid out for");
  model_.check_batch(tokens, targets, rows_, columns_, resets);
  const size_t bytes = static_cast<size_t>(rows_ * columns_) * sizeof(int32_t);
  std::memcpy(staged(micro, 0), tokens, bytes);
  std::memcpy(staged(micro, 1), targets, bytes);
  if (positions_) std::memcpy(staged(micro, 2), resets.positions, bytes);
  if (starts_) std::memcpy(staged(micro, 3), resets.attention_starts, bytes);
}

void DeviceStep::queue(double dloss) {
  model_.zero_grad();
  for (int micro = 0; micro < accum_; ++micro) {
    model_.queue_batch(staged(micro, 0), staged(micro, 1), rows_, columns_,
                       {positions_ ? staged(micro, 2) : nullptr, starts_ ? staged(micro, 3) : nullptr});
    model_.queue_forward();
    const Tensor losses = model_.token_losses();
    ops_.cast(losses_.slice(micro, micro + 1).view(losses.shape), losses);
    model_.backward(dloss);
  }
  optimizer_.queue_update();
}

std::optional<DeviceStep::Result> DeviceStep::run(double lr, double gradient_divisor, double dloss, bool captured) {
  optimizer_.prepare(lr, gradient_divisor);
  if (!captured) {
    queue(dloss);
    return finish();
  }
  if (!graph_ || dloss != graph_dloss_) {
    graph_.reset();
    graph_ = ops_.capture([&] { queue(dloss); }, why_not_);
    if (!graph_) return std::nullopt;
    graph_dloss_ = dloss;
  }
  graph_->launch();
  return finish();
}

DeviceStep::Result DeviceStep::finish() {
  // As train_step adds them up: each micro-batch's losses summed in order.
  const std::vector<double> losses = copy_to_doubles(ops_, losses_);
  const std::span<const double> all(losses);
  const size_t per_micro = static_cast<size_t>(rows_ * columns_);
  Result result;
  for (int micro = 0; micro < accum_; ++micro)
    result.nats += GptModel::loss_sum(all.subspan(static_cast<size_t>(micro) * per_micro, per_micro));
  result.update = optimizer_.finish();
  return result;
}

}  // namespace kiln
