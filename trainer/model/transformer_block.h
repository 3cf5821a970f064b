// One pre-norm transformer block:
//   mid = x + attention(norm1(x));  out = mid + mlp(norm2(mid)),
// the attention latent under model.attention=mla (latent_attention.h), the MLP a mixture of
// experts in the layers moe.* names (moe_mlp.h).
// Backward turns the gradient of `out` into the gradient of `x` in the same buffer.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/latent_attention.h"
#include "trainer/model/mlp.h"
#include "trainer/model/moe_mlp.h"
#include "trainer/model/norm.h"
#include "trainer/model/self_attention.h"

namespace kiln {

class TransformerBlock {
 public:
  // index: the layer's place in the model (which MoE placement reads); name: its parameters'
  // prefix, "layers.<index>" (a multi-token prediction module's block is named after it).
  void bind(const LayerBuild& build, int index, const Tensor& rope_table, const std::string& name);
  void forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& x,
               const BlockScratch& scratch) const;
  // d_residual holds d(out) on entry and d(x) on return. dloss: each token's loss weight.
  void backward(Ops& ops, const Batch& batch, const Tensor& d_residual, const Tensor& x,
                const BlockScratch& scratch, double dloss) const;
  // A split backward's weight pass, after backward ran with batch.defer_weights: every weight
  // gradient of the block (the linear layers', the experts' and the router's, the norms'), in
  // backward's order. Only LoRA adapters' come with the input gradients (lora_adapter.h).
  void backward_weights(Ops& ops, const Batch& batch) const;

  int layer() const { return layer_; }
  // The block's mixture of experts; null in a dense layer.
  MoeMlp* experts() { return moe_ ? &experts_ : nullptr; }
  const MoeMlp* experts() const { return moe_ ? &experts_ : nullptr; }

 private:
  Norm norm1_, norm2_;
  SelfAttention attention_;
  LatentAttention latent_;
  bool latent_on_ = false;
  Mlp mlp_;
  MoeMlp experts_;
  bool moe_ = false;
  int layer_ = 0;
  std::vector<Tensor> norm1_out_, mid_, norm2_out_;  // per slot
};

}  // namespace kiln
