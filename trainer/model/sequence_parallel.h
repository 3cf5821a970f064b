// Megatron's sequence parallelism (parallel.sequence_parallel) over the tensor group.
//
// Between the tensor-parallel layers (the norms and the residual adds) every rank of the
// group holds only its share of the micro-batch's tokens: rows [r n / tp, (r + 1) n / tp) of
// the flattened [b t, C] activations, which Batch::shard_of views as [b, t / tp, C]. A
// column-parallel layer all-gathers the shares into the whole input where tensor parallelism
// alone would read it replicated; a row-parallel layer reduce-scatters its partial sums
// where tensor parallelism alone all-reduces them; backward does the reverse. The arithmetic
// is the same, and the residual stream's activations and the norms' work are divided by tp.
//
// The norms' weights (and a row-parallel layer's bias, which is added to the shares) are
// whole on every rank but see only its tokens: their gradients are summed over the group
// (ShareGradients).
#pragma once

#include <functional>
#include <initializer_list>

#include "trainer/model/layer_build.h"

namespace kiln {

class SequenceParallel {
 public:
  // Lays out two [micro_batch, seq_len, d_model] scratch buffers: one for gathered
  // activations, one for whole partial sums and gathered gradients.
  void bind(const LayerBuild& build);
  Communicator& group() const { return *group_; }

  // The whole [b, t, C] input gathered from every rank's share, in the first buffer.
  Tensor gather(const Batch& batch, const Tensor& share) const;
  // The second buffer as [b, t, C]: a partial sum to scatter, or a whole input gradient.
  Tensor whole(const Batch& batch) const { return batch.of(sums_); }
  // share = this rank's rows of the sum of `whole` over the group.
  void scatter(const Tensor& share, const Tensor& whole) const;
  // The whole [b, t, C] gradient gathered from every rank's share, in the second buffer.
  Tensor gather_gradient(const Batch& batch, const Tensor& share) const;

 private:
  Communicator* group_ = nullptr;
  Tensor gathered_, sums_;
};

// The gradient of a parameter that is whole on every rank of a group but sees only the rank's
// share of the work (its tokens under sequence parallelism, its heads under tensor
// parallelism), summed over the group once per backward. Gradients accumulate over
// micro-batches, so the parameters' gradients are first zeroed on every rank but the first:
// the sum then adds this micro-batch's shares to what the earlier ones left, once. Without a
// group of several ranks it only computes.
class ShareGradients {
 public:
  explicit ShareGradients(Communicator* group) : group_(group && group->size() > 1 ? group : nullptr) {}
  // Sequence parallelism's tensor group; none when it is off.
  explicit ShareGradients(const SequenceParallel* sequence)
      : ShareGradients(sequence ? &sequence->group() : nullptr) {}
  // Runs `accumulate`, which adds this rank's share to the parameters' gradients, and sums
  // them over the group (a frozen parameter, without a gradient, is left out).
  void sum(Ops& ops, std::initializer_list<const Parameter*> params, const std::function<void()>& accumulate) const;

 private:
  Communicator* group_;
};

}  // namespace kiln
