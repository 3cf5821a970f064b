#include "trainer/model/multi_token_prediction.h"

#include "trainer/model/sequence_parallel.h"

namespace kiln {

void MtpModule::bind(const LayerBuild& build, const LayerBuild& block_build, int depth, const Tensor& rope_table) {
  const ModelConfig& m = build.model;
  const int64_t C = m.d_model;
  // Named from 0 as the layers are: module mtp.0 predicts at depth 1. Its block is layer
  // n_layer + depth - 1 of the model's MoE placement (moe.dense_layers, moe.layer_freq).
  const std::string name = "mtp." + std::to_string(depth - 1);
  // Parameters in the order backward reaches them.
  final_norm_.bind(build, name + ".final_norm");
  block_.bind(block_build, m.n_layer + depth - 1, rope_table, name);
  eh_proj_.bind(build, name + ".eh_proj", 2 * C, C, false, m.init_std);
  enorm_.bind(build, name + ".enorm");
  hnorm_.bind(build, name + ".hnorm");
  sequence_ = build.sequence;
  recompute_block_ = build.split.recompute == Recompute::Full;
  joined_.clear();
  x_.clear();
  y_.clear();
  for (int s = 0; s < build.slots; ++s) {
    joined_.push_back(build.take_share(build.activations, 2 * C));
    x_.push_back(build.take_share(build.activations, C));
    y_.push_back(build.take_share(build.activations, C));
  }
  normed_ = build.take_share(build.scratch, C);
  d_y_ = build.take_share(build.scratch, C);
  d_joined_ = build.take_share(build.scratch, 2 * C);
  d_normed_ = build.take_share(build.scratch, C);
}

namespace {
// Half `half` (0: the embedding's, 1: the hidden state's) of each row of joined [N, 2C].
HeadColumns half_of(int64_t C, int64_t half) { return {1, C, half * C, 0, 0, 0}; }
}  // namespace

void MtpModule::forward(Ops& ops, const Batch& batch, const Tensor& h_out, const Tensor& h_prev, const Tensor& e,
                        const BlockScratch& scratch) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor joined = batch.share_of(joined_[s]), normed = batch.share_of(normed_);
  const Tensor x = batch.share_of(x_[s]), y = batch.share_of(y_[s]);
  const int64_t C = x.shape.cols();
  enorm_.forward(ops, batch, normed, e);
  ops.copy_head_columns(joined, normed, half_of(C, 0));
  hnorm_.forward(ops, batch, normed, h_prev);
  ops.copy_head_columns(joined, normed, half_of(C, 1));
  eh_proj_.forward(ops, x, joined);
  block_.forward(ops, batch, y, x, scratch);
  final_norm_.forward(ops, batch, h_out, y);
}

void MtpModule::backward(Ops& ops, const Batch& batch, const Tensor& d_h_prev, const Tensor& d_e,
                         const Tensor& d_h_out, const Tensor& h_prev, const Tensor& e, const BlockScratch& scratch,
                         double dloss) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor joined = batch.share_of(joined_[s]), x = batch.share_of(x_[s]), y = batch.share_of(y_[s]);
  const Tensor d_y = batch.share_of(d_y_), d_joined = batch.share_of(d_joined_), d_normed = batch.share_of(d_normed_);
  const int64_t C = x.shape.cols();
  ops.fill(d_y, 0.0);
  final_norm_.backward(ops, batch, d_y, d_h_out, y);
  if (recompute_block_) block_.forward(ops, batch, y, x, scratch);
  block_.backward(ops, batch, d_y, x, scratch, dloss);
  // d_y now holds the gradient of x. Each rank projected its own tokens with the whole W.
  ShareGradients(sequence_).sum(ops, {&eh_proj_.weight()}, [&] { eh_proj_.backward(ops, d_joined, d_y, joined); });
  ops.take_columns(d_normed, d_joined, 0, 1.0);
  ops.fill(d_e, 0.0);
  enorm_.backward(ops, batch, d_e, d_normed, e);
  ops.take_columns(d_normed, d_joined, C, 1.0);
  ops.fill(d_h_prev, 0.0);
  hnorm_.backward(ops, batch, d_h_prev, d_normed, h_prev);
}

}  // namespace kiln
