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
  proj_embedding_.bind(build, name + ".proj_embedding", C, C, false, m.init_std);
  proj_hidden_.bind(build, name + ".proj_hidden", C, C, false, m.init_std);
  enorm_.bind(build, name + ".enorm");
  hnorm_.bind(build, name + ".hnorm");
  sequence_ = build.sequence;
  recompute_block_ = build.split.recompute == Recompute::Full;
  en_.clear();
  hn_.clear();
  x_.clear();
  y_.clear();
  for (int s = 0; s < build.slots; ++s) {
    en_.push_back(build.take_share(build.activations, C));
    hn_.push_back(build.take_share(build.activations, C));
    x_.push_back(build.take_share(build.activations, C));
    y_.push_back(build.take_share(build.activations, C));
  }
  half_ = build.take_share(build.scratch, C);
  d_y_ = build.take_share(build.scratch, C);
  d_en_ = build.take_share(build.scratch, C);
  d_hn_ = build.take_share(build.scratch, C);
}

void MtpModule::forward(Ops& ops, const Batch& batch, const Tensor& h_out, const Tensor& h_prev, const Tensor& e,
                        const BlockScratch& scratch) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor en = batch.share_of(en_[s]), hn = batch.share_of(hn_[s]);
  const Tensor x = batch.share_of(x_[s]), y = batch.share_of(y_[s]), half = batch.share_of(half_);
  enorm_.forward(ops, batch, en, e);
  hnorm_.forward(ops, batch, hn, h_prev);
  proj_embedding_.forward(ops, x, en);
  proj_hidden_.forward(ops, half, hn);
  ops.add(x, x, half);
  block_.forward(ops, batch, y, x, scratch);
  final_norm_.forward(ops, batch, h_out, y);
}

void MtpModule::backward(Ops& ops, const Batch& batch, const Tensor& d_h_prev, const Tensor& d_e,
                         const Tensor& d_h_out, const Tensor& h_prev, const Tensor& e, const BlockScratch& scratch,
                         double dloss) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor en = batch.share_of(en_[s]), hn = batch.share_of(hn_[s]);
  const Tensor x = batch.share_of(x_[s]), y = batch.share_of(y_[s]);
  const Tensor d_y = batch.share_of(d_y_), d_en = batch.share_of(d_en_), d_hn = batch.share_of(d_hn_);
  ops.fill(d_y, 0.0);
  final_norm_.backward(ops, batch, d_y, d_h_out, y);
  if (recompute_block_) block_.forward(ops, batch, y, x, scratch);
  block_.backward(ops, batch, d_y, x, scratch, dloss);
  // d_y now holds the gradient of x. Each rank projected its own tokens with the whole halves.
  ShareGradients(sequence_).sum(ops, {&proj_embedding_.weight(), &proj_hidden_.weight()}, [&] {
    proj_embedding_.backward(ops, d_en, d_y, en);
    proj_hidden_.backward(ops, d_hn, d_y, hn);
  });
  ops.fill(d_e, 0.0);
  enorm_.backward(ops, batch, d_e, d_en, e);
  ops.fill(d_h_prev, 0.0);
  hnorm_.backward(ops, batch, d_h_prev, d_hn, h_prev);
}

}  // namespace kiln
