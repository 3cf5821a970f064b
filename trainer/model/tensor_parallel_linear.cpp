#include "trainer/model/tensor_parallel_linear.h"

#include <numeric>

namespace kiln {

namespace {
bool communicates(const Communicator* group) { return group && group->size() > 1; }
}  // namespace

void ColumnParallelLinear::bind(const LayerBuild& build, const std::string& name, int64_t in,
                                const std::vector<int64_t>& parts, bool bias, double init_std) {
  const int64_t out = std::accumulate(parts.begin(), parts.end(), int64_t{0});
  linear_.bind(build, name, in, out / build.split.tp(), bias, init_std, build.split.split(0, parts));
  group_ = build.split.tensor;
  sequence_ = build.sequence;
}

void ColumnParallelLinear::bind_shared(const Parameter& weight, Communicator* group,
                                       const SequenceParallel* sequence) {
  linear_.bind_shared(weight);
  group_ = group;
  sequence_ = sequence;
}

void ColumnParallelLinear::forward(Ops& ops, const Batch& batch, const Tensor& y,
                                   const Tensor& x) const {
  linear_.forward(ops, y, sequence_ ? sequence_->gather(batch, x) : x);
}

void ColumnParallelLinear::backward(Ops& ops, const Batch& batch, const Tensor& dx,
                                    const Tensor& dy, const Tensor& x) const {
  if (!sequence_) {
    linear_.backward(ops, dx, dy, x);
    if (!dx.empty() && communicates(group_)) group_->all_reduce(dx, ReduceOp::Sum);
    return;
  }
  // Forward's gathered input was overwritten since: gathered again (Megatron does the same,
  // keeping only the share).
  const Tensor whole_dx = dx.empty() ? Tensor{} : sequence_->whole(batch);
  linear_.backward(ops, whole_dx, dy, sequence_->gather(batch, x));
  if (!dx.empty()) sequence_->scatter(dx, whole_dx);
}

void RowParallelLinear::bind(const LayerBuild& build, const std::string& name, int64_t in,
                             int64_t out, bool bias, double init_std) {
  // Backward produces the bias gradient before the weight's: it comes first.
  has_bias_ = bias;
  if (bias) bias_ = build.params.add(name + ".bias", {out}, Init::Zeros);
  linear_.bind(build, name, in / build.split.tp(), out, false, init_std,
               build.split.split(1, {in}));
  group_ = build.split.tensor;
  sequence_ = build.sequence;
}

void RowParallelLinear::forward(Ops& ops, const Batch& batch, const Tensor& y,
                                const Tensor& x) const {
  if (sequence_) {
    const Tensor partial = sequence_->whole(batch);
    linear_.forward(ops, partial, x);
    sequence_->scatter(y, partial);
  } else {
    linear_.forward(ops, y, x);
    if (communicates(group_)) group_->all_reduce(y, ReduceOp::Sum);
  }
  if (has_bias_) ops.add_bias(y.view({y.shape.rows(), y.shape.cols()}), bias_.value);
}

void RowParallelLinear::backward(Ops& ops, const Batch& batch, const Tensor& dx,
                                 const Tensor& dy, const Tensor& x) const {
  // Every rank sums the bias gradient over the whole dy: the same whole gradient everywhere.
  const Tensor whole_dy = sequence_ ? sequence_->gather_gradient(batch, dy) : dy;
  if (has_bias_)
    ops.bias_backward(bias_.grad, whole_dy.view({whole_dy.shape.rows(), whole_dy.shape.cols()}));
  linear_.backward(ops, dx, whole_dy, x);
}

}  // namespace kiln
