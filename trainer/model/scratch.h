// Buffers every block uses in turn and nobody keeps: a branch's output before the
// residual add, and the gradients flowing back through one block.
#pragma once

#include "trainer/model/layer_build.h"
#include "trainer/model/latent_attention.h"
#include "trainer/model/moe_mlp.h"

namespace kiln {

struct BlockScratch {
  // This rank's token share (sequence_parallel.h), [B, T / parts, C]:
  Tensor branch_out;  // attention or MLP output, before the residual add
  Tensor d_norm_out;  // gradient of a norm's output
  Tensor d_attn;      // [B, T, n_head * head_dim]
  Tensor d_qkv;       // [B, T, qkv width]
  Tensor d_hidden;    // [B, T, d_ff] gradient of the MLP's activation output
  Tensor d_fc;        // [B, T, d_ff or 2 d_ff] gradient of the first MLP product
  ExpertGradients experts;  // in a model with MoE layers
  LatentScratch latent;     // under latent attention (model.attention=mla)

  void bind(const LayerBuild& build);
};

}  // namespace kiln
