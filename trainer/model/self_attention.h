// Causal self-attention, its heads (query and key/value groups alike) split over the
// tensor-parallel ranks: fused QKV projection, RoPE (Llama), attention with grouped-query
// heads, output projection; the batch's document resets, when it has them, give RoPE its
// positions and attention its key starts. Saves the rotated QKV, the attention output and its
// log-sum-exp per slot; under selective recomputation the last two are shared by every
// layer and backward recomputes them from the saved qkv.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/tensor_parallel_linear.h"
#include "trainer/model/scratch.h"

namespace kiln {

class SelfAttention {
 public:
  void bind(const LayerBuild& build, const std::string& name, const Tensor& rope_table);
  void forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const;
  // dx = input gradient (overwrites); parameter gradients accumulate.
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                const BlockScratch& scratch) const;

 private:
  AttentionShape shape_;
  bool rope_ = false;
  bool recompute_core_ = false;  // train.recompute=selective
  Tensor rope_table_;
  ColumnParallelLinear qkv_;  // heads split over the tensor group
  RowParallelLinear proj_;
  std::vector<Tensor> qkv_out_, attn_out_, lse_;  // per slot
};

}  // namespace kiln
