// The feed-forward branch: GELU MLP (GPT-2) or SwiGLU (Llama), whose first product
// yields [gate | up] in one matrix.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/tensor_parallel_linear.h"
#include "trainer/model/scratch.h"

namespace kiln {

class Mlp {
 public:
  void bind(const LayerBuild& build, const std::string& name);
  void forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const;
  // dx = input gradient (overwrites); parameter gradients accumulate (the linear layers'
  // weights' in backward_weights, when batch.defer_weights).
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                const BlockScratch& scratch) const;
  void backward_weights(Ops& ops, const Batch& batch) const;

 private:
  bool swiglu_ = false;
  ColumnParallelLinear fc_;  // hidden units split over the tensor group
  RowParallelLinear proj_;
  std::vector<Tensor> fc_out_, hidden_;  // per slot
};

}  // namespace kiln
