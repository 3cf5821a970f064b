#include "trainer/model/tensor_parallel_linear.h"

#include <numeric>

namespace kiln {

namespace {
bool communicates(const Communicator* group) { return group && group->size() > 1; }
}  // namespace

void ColumnParallelLinear::bind(const LayerBuild& build, const std::string& name, int64_t in,
                                const std::vector<int64_t>& parts, bool bias, double init_std,
                                const std::vector<std::string>& lora) {
  const int64_t out = std::accumulate(parts.begin(), parts.end(), int64_t{0});
  linear_.bind(build, name, in, out / build.split.tp(), bias, init_std, build.split.split(0, parts));
  adapters_.clear();
  int64_t first = 0;  // the part's first column on this rank
  for (size_t i = 0; i < lora.size(); ++i) {
    if (!lora[i].empty()) {
      adapters_.emplace_back();
      adapters_.back().bind_column(build, name + "." + lora[i], in, parts[i], first);
    }
    first += parts[i] / build.split.tp();
  }
  group_ = build.split.tensor;
  sequence_ = build.sequence;
}

void ColumnParallelLinear::bind_shared(const LayerBuild& build, const Parameter& weight, Communicator* group,
                                       const SequenceParallel* sequence) {
  linear_.bind_shared(build, weight);
  group_ = group;
  sequence_ = sequence;
}

Tensor ColumnParallelLinear::whole_input(const Batch& batch, const Tensor& x) const {
  return sequence_ ? sequence_->gather(batch, x) : x;
}

void ColumnParallelLinear::forward(Ops& ops, const Batch& batch, const Tensor& y,
                                   const Tensor& x) const {
  const Tensor whole = whole_input(batch, x);
  linear_.forward(ops, y, whole);
  for (const LoraAdapter& adapter : adapters_) adapter.forward(ops, batch, y, whole);
}

void ColumnParallelLinear::forward_gelu(Ops& ops, const Batch& batch, const Tensor& y,
                                        const Tensor& pre, const Tensor& x) const {
  const Tensor whole = whole_input(batch, x);
  if (adapters_.empty()) {
    linear_.forward_gelu(ops, y, pre, whole);
    return;
  }
  // The adapter's output joins the product before the GELU.
  linear_.forward(ops, pre, whole);
  for (const LoraAdapter& adapter : adapters_) adapter.forward(ops, batch, pre, whole);
  ops.gelu_forward(y, pre);
}

void ColumnParallelLinear::backward(Ops& ops, const Batch& batch, const Tensor& dx,
                                    const Tensor& dy, const Tensor& x) const {
  if (!sequence_) {
    linear_.backward(ops, batch, dx, dy, x);
    for (const LoraAdapter& adapter : adapters_) adapter.backward(ops, batch, dx, dy, x);
    if (!dx.empty() && communicates(group_)) group_->all_reduce(dx, ReduceOp::Sum);
    return;
  }
  // Forward's gathered input was overwritten since: gathered again (Megatron does the same,
  // keeping only the share).
  const Tensor whole_dx = dx.empty() ? Tensor{} : sequence_->whole(batch);
  const Tensor whole = whole_input(batch, x);
  linear_.backward(ops, batch, whole_dx, dy, whole);
  for (const LoraAdapter& adapter : adapters_) adapter.backward(ops, batch, whole_dx, dy, whole);
  if (!dx.empty()) sequence_->scatter(dx, whole_dx);
}

void ColumnParallelLinear::backward_weights(Ops& ops, const Batch& batch) const {
  linear_.backward_weights(ops, batch.slot, batch.b * batch.t);
}

void RowParallelLinear::bind(const LayerBuild& build, const std::string& name, int64_t in,
                             int64_t out, bool bias, double init_std, const std::string& lora) {
  linear_.bind(build, name, in / build.split.tp(), out, bias, init_std,
               build.split.split(1, {in}));
  adapters_.clear();
  if (!lora.empty()) {
    adapters_.emplace_back();
    adapters_.back().bind_row(build, name + "." + lora, in, out);
  }
  group_ = build.split.tensor;
  sequence_ = build.sequence;
}

void RowParallelLinear::forward(Ops& ops, const Batch& batch, const Tensor& y,
                                const Tensor& x) const {
  if (sequence_) {
    const Tensor partial = sequence_->whole(batch);
    linear_.product(ops, partial, x);
    sequence_->scatter(y, partial);
    linear_.add_bias(ops, y);
  } else if (communicates(group_)) {
    linear_.product(ops, y, x);
    group_->all_reduce(y, ReduceOp::Sum);
    linear_.add_bias(ops, y);
  } else {
    linear_.forward(ops, y, x);
  }
  for (const LoraAdapter& adapter : adapters_) adapter.forward(ops, batch, y, x);
}

void RowParallelLinear::backward(Ops& ops, const Batch& batch, const Tensor& dx,
                                 const Tensor& dy, const Tensor& x, const Tensor& gelu_pre) const {
  // Every rank sums the bias gradient over the whole dy: the same whole gradient everywhere.
  const Tensor whole_dy = sequence_ ? sequence_->gather_gradient(batch, dy) : dy;
  if (adapters_.empty()) {
    linear_.backward(ops, batch, dx, whole_dy, x, gelu_pre);
    return;
  }
  // The adapter's input gradient joins the product's before the GELU's backward.
  linear_.backward(ops, batch, dx, whole_dy, x);
  for (const LoraAdapter& adapter : adapters_) adapter.backward(ops, batch, dx, whole_dy, x);
  if (!gelu_pre.empty()) ops.gelu_backward(dx, gelu_pre, dx);
}

void RowParallelLinear::backward_weights(Ops& ops, const Batch& batch) const {
  linear_.backward_weights(ops, batch.slot, batch.b * batch.t);
}

}  // namespace kiln
