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
// bias, which every rank holds whole, is added once after the sum. Backward needs no
// communication: dy is whole on every rank.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/linear.h"

namespace kiln {

class ColumnParallelLinear {
 public:
  // parts: the whole output's segments, each split evenly over the group (a fused qkv's
  // query, key and value widths; SwiGLU's gate and up).
  void bind(const LayerBuild& build, const std::string& name, int64_t in,
            const std::vector<int64_t>& parts, bool bias, double init_std);
  // Shares a weight already split by rows over the group (the tied vocabulary embedding).
  void bind_shared(const Parameter& weight, Communicator* group);

  void forward(Ops& ops, const Tensor& y, const Tensor& x) const { linear_.forward(ops, y, x); }
  // dx = dy W summed over the group (overwrites; skipped when empty); parameter gradients
  // accumulate.
  void backward(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& x) const;

 private:
  Linear linear_;
  Communicator* group_ = nullptr;
};

class RowParallelLinear {
 public:
  // in: the whole input width, split evenly over the group.
  void bind(const LayerBuild& build, const std::string& name, int64_t in, int64_t out, bool bias,
            double init_std);
  void forward(Ops& ops, const Tensor& y, const Tensor& x) const;
  // dx: this rank's slice of the input gradient (overwrites).
  void backward(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& x) const;

 private:
  Linear linear_;
  Parameter bias_;
  bool has_bias_ = false;
  Communicator* group_ = nullptr;
};

}  // namespace kiln
