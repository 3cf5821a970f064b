#include "trainer/model/sequence_parallel.h"

namespace kiln {

void SequenceParallel::bind(const LayerBuild& build) {
  group_ = build.split.tensor;
  gathered_ = build.take(build.scratch, build.model.d_model);
  sums_ = build.take(build.scratch, build.model.d_model);
}

Tensor SequenceParallel::gather(const Batch& batch, const Tensor& share) const {
  const Tensor whole = batch.of(gathered_);
  group_->all_gather(whole, share);
  return whole;
}

void SequenceParallel::scatter(const Tensor& share, const Tensor& whole) const {
  group_->reduce_scatter(share, whole);
}

Tensor SequenceParallel::gather_gradient(const Batch& batch, const Tensor& share) const {
  const Tensor whole = batch.of(sums_);
  group_->all_gather(whole, share);
  return whole;
}

void ShareGradients::sum(Ops& ops, std::initializer_list<const Parameter*> params,
                         const std::function<void()>& accumulate) const {
  if (group_ && group_->rank() != 0)
    for (const Parameter* p : params)
      if (!p->grad.empty()) ops.fill(p->grad, 0.0);
  accumulate();
  if (group_)
    for (const Parameter* p : params)
      if (!p->grad.empty()) group_->all_reduce(p->grad, ReduceOp::Sum);
}

}  // namespace kiln
