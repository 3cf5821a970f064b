// Megatron's tensor-parallel linear layers, over the model's tensor group (with tp = 1 they
// are plain linear layers and never communicate). W is [out, in] as in PyTorch.
//
// ColumnParallelLinear splits W by output rows: every rank holds the whole input x and
// computes its slice of y = x W^T + b. Backward's input gradient from one rank covers only
// its slice of the outputs, so dx is all-reduced over the group (Megatron's "copy to tensor
// parallel region").
//
// RowParallelLinear splits W by input columns: each rank holds its slice of x (the output of
// a column-parallel layer), the partial products are all-reduced into the whole y, and the
// bias, which every rank holds whole, is added once after the sum (Megatron's order: on one
// rank alone the bias goes into the product). Backward needs no communication: dy is whole
// on every rank, and so is the bias gradient, which comes out of the weight gradient's
// product.
//
// With sequence parallelism (sequence_parallel.h) the input of a column-parallel layer and
// the output of a row-parallel one are this rank's share of the tokens: the column layer
// gathers x whole (again in backward, where it reduce-scatters dx instead of all-reducing
// it); the row layer reduce-scatters its partial products and adds the bias to its share,
// and gathers dy whole in backward.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/linear.h"
#include "trainer/model/lora_adapter.h"
#include "trainer/model/sequence_parallel.h"

namespace kiln {

class ColumnParallelLinear {
 public:
  // parts: the whole output's segments, each split evenly over the group (a fused qkv's
  // query, key and value widths; SwiGLU's gate and up). lora: each part's LoRA target name
  // (lora_targets.h), empty for a part without an adapter (or no list: none).
  void bind(const LayerBuild& build, const std::string& name, int64_t in,
            const std::vector<int64_t>& parts, bool bias, double init_std,
            const std::vector<std::string>& lora = {});
  // Shares a weight already split by rows over the group (the tied vocabulary embedding).
  void bind_shared(const LayerBuild& build, const Parameter& weight, Communicator* group,
                   const SequenceParallel* sequence);

  void forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const;
  // pre = x W^T + b, y = gelu(pre) (this rank's hidden units of GPT-2's MLP).
  void forward_gelu(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& pre,
                    const Tensor& x) const;
  // dx = dy W summed over the group (overwrites; skipped when empty); parameter gradients
  // accumulate (the weight's later, in backward_weights, when batch.defer_weights; a LoRA
  // adapter's always here).
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy,
                const Tensor& x) const;
  void backward_weights(Ops& ops, const Batch& batch) const;

 private:
  // x whole: this rank's share gathered under sequence parallelism.
  Tensor whole_input(const Batch& batch, const Tensor& x) const;

  Linear linear_;
  LoraAdapters adapters_;
  Communicator* group_ = nullptr;
  const SequenceParallel* sequence_ = nullptr;
};

class RowParallelLinear {
 public:
  // in: the whole input width, split evenly over the group. lora: the LoRA target name of an
  // adapter beside it, or empty.
  void bind(const LayerBuild& build, const std::string& name, int64_t in, int64_t out, bool bias,
            double init_std, const std::string& lora = {});
  void forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const;
  // dx: this rank's slice of the input gradient (overwrites). With gelu_pre given, x was
  // gelu(gelu_pre) and dx is the gradient of gelu_pre (Linear::backward). The weight's
  // gradient waits for backward_weights when batch.defer_weights.
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy,
                const Tensor& x, const Tensor& gelu_pre = {}) const;
  void backward_weights(Ops& ops, const Batch& batch) const;

 private:
  Linear linear_;  // its bias whole on every rank
  LoraAdapters adapters_;
  Communicator* group_ = nullptr;
  const SequenceParallel* sequence_ = nullptr;
};

}  // namespace kiln
