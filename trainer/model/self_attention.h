// Causal self-attention, its heads (query and key/value groups alike) split over the
// tensor-parallel ranks: fused QKV projection, the query and key heads' RMSNorm (Qwen3's
// model.qk_norm, qk_norm.h), RoPE (Llama), attention with grouped-query
// heads, output projection; the batch's document resets, when it has them, give RoPE its
// positions and attention its key starts. Saves the rotated QKV, the attention output and its
// log-sum-exp per slot; under selective recomputation the last two are shared by every
// layer and backward recomputes them from the saved qkv. Under context parallelism the
// attention core is ring attention over the context group (context_parallel.h).
#pragma once

#include <string>
#include <vector>

#include "trainer/model/qk_norm.h"
#include "trainer/model/tensor_parallel_linear.h"
#include "trainer/model/scratch.h"
#include "trainer/model/context_parallel.h"

namespace kiln {

class SelfAttention {
 public:
  void bind(const LayerBuild& build, const std::string& name, const Tensor& rope_table);
  void forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const;
  // dx = input gradient (overwrites); parameter gradients accumulate (the projections' and
  // the head norms' in backward_weights, when batch.defer_weights).
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                const BlockScratch& scratch) const;
  void backward_weights(Ops& ops, const Batch& batch) const;

 private:
  // The attention core: this rank's queries over every key they see.
  void attend(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& lse, const Tensor& qkv) const;

  AttentionShape shape_;
  const ContextParallel* context_ = nullptr;
  bool rope_ = false;
  bool qk_norm_on_ = false;
  bool recompute_core_ = false;  // train.recompute=selective
  Tensor rope_table_;
  ColumnParallelLinear qkv_;  // heads split over the tensor group
  RowParallelLinear proj_;
  QkNorm qk_norm_;  // bound only under model.qk_norm
  std::vector<Tensor> qkv_out_, attn_out_, lse_;  // per slot
};

}  // namespace kiln
