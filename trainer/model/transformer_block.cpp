#include "trainer/model/transformer_block.h"

namespace kiln {

void TransformerBlock::bind(const LayerBuild& build, int index, const Tensor& rope_table, const std::string& name) {
  layer_ = index;
  moe_ = build.model.moe.is_moe_layer(index);
  // Parameters in the order backward reaches them.
  if (moe_) experts_.bind(build, name + ".moe");
  else mlp_.bind(build, name + ".mlp");
  norm2_.bind(build, name + ".norm2");
  latent_on_ = build.model.latent_attention();
  if (latent_on_) latent_.bind(build, name + ".attn", rope_table);
  else attention_.bind(build, name + ".attn", rope_table);
  norm1_.bind(build, name + ".norm1");
  norm1_out_.clear();
  mid_.clear();
  norm2_out_.clear();
  for (int s = 0; s < build.slots; ++s) {
    norm1_out_.push_back(build.take_share(build.activations, build.model.d_model));
    mid_.push_back(build.take_share(build.activations, build.model.d_model));
    norm2_out_.push_back(build.take_share(build.activations, build.model.d_model));
  }
}

void TransformerBlock::forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& x,
                               const BlockScratch& scratch) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor n1 = batch.share_of(norm1_out_[s]), mid = batch.share_of(mid_[s]);
  const Tensor n2 = batch.share_of(norm2_out_[s]), branch = batch.share_of(scratch.branch_out);
  norm1_.forward(ops, batch, n1, x);
  if (latent_on_) latent_.forward(ops, batch, branch, n1, scratch.latent);
  else attention_.forward(ops, batch, branch, n1);
  ops.add(mid, x, branch);
  norm2_.forward(ops, batch, n2, mid);
  if (moe_) experts_.forward(ops, batch, branch, n2, scratch.experts);
  else mlp_.forward(ops, batch, branch, n2);
  ops.add(out, mid, branch);
}

void TransformerBlock::backward(Ops& ops, const Batch& batch, const Tensor& d_residual,
                                const Tensor& x, const BlockScratch& scratch, double dloss) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor n1 = batch.share_of(norm1_out_[s]), mid = batch.share_of(mid_[s]);
  const Tensor n2 = batch.share_of(norm2_out_[s]), d_norm = batch.share_of(scratch.d_norm_out);
  // The residual path carries d(out) straight to d(mid); each branch adds its share.
  if (moe_) experts_.backward(ops, batch, d_norm, d_residual, n2, scratch.experts, dloss);
  else mlp_.backward(ops, batch, d_norm, d_residual, n2, scratch);
  norm2_.backward(ops, batch, d_residual, d_norm, mid);
  if (latent_on_) {
    latent_.backward(ops, batch, d_norm, d_residual, n1, scratch.d_attn, scratch.d_qkv, scratch.latent);
  } else {
    attention_.backward(ops, batch, d_norm, d_residual, n1, scratch);
  }
  norm1_.backward(ops, batch, d_residual, d_norm, x);
}

void TransformerBlock::backward_weights(Ops& ops, const Batch& batch) const {
  if (moe_) experts_.backward_weights(ops, batch);
  else mlp_.backward_weights(ops, batch);
  norm2_.backward_weights(ops, batch);
  if (latent_on_) latent_.backward_weights(ops, batch);
  else attention_.backward_weights(ops, batch);
  norm1_.backward_weights(ops, batch);
}

}  // namespace kiln
