#include "trainer/model/latent_attention.h"

#include <cmath>

#include "trainer/model/rope_frequencies.h"

namespace kiln {

namespace {

LatentShape latent_shape(const ModelConfig& m, int tp) {
  return {m.n_head / tp, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.q_lora_rank, m.kv_lora_rank};
}

}  // namespace

void LatentScratch::bind(const LayerBuild& build) {
  const LatentShape s = latent_shape(build.model, build.split.tp());
  q = build.take(build.scratch, s.heads * s.qk());
  kv = build.take(build.scratch, s.heads * s.kv());
  down = build.take(build.scratch, s.down());
  d_out = build.take(build.scratch, s.heads * s.value);
  if (s.q_rank > 0) {
    d_q_normed = build.take(build.scratch, s.q_rank);
    d_q_latent = build.take(build.scratch, s.q_rank);
  } else {
    d_input_part = build.take(build.scratch, build.model.d_model);
  }
  d_kv_normed = build.take(build.scratch, s.kv_rank);
  d_kv_latent = build.take(build.scratch, s.kv_rank);
}

void LatentAttention::bind(const LayerBuild& build, const std::string& name, const Tensor& rope_table) {
  const ModelConfig& m = build.model;
  const int tp = build.split.tp();
  shape_ = latent_shape(m, tp);
  rope_table_ = rope_table;
  recompute_core_ = build.split.recompute == Recompute::Selective;
  q_scale_ = latent_softmax_factor(m);
  group_ = tp > 1 ? build.split.tensor : nullptr;
  sequence_ = build.sequence;
  context_ = build.context;
  const LatentShape& s = shape_;
  const int64_t H = m.n_head, C = m.d_model;
  // Parameters in the order backward reaches them.
  proj_.bind(build, name + ".proj", H * s.value, C, false, m.init_std / std::sqrt(2.0 * m.n_layer));
  kv_up_.bind(build, name + ".kv_up", s.kv_rank, s.heads * s.kv(), false, m.init_std, build.split.split(0, {H * s.kv()}));
  kv_norm_.bind_latent(build, name + ".kv_norm", s.kv_rank, group_);
  if (s.q_rank > 0) {
    q_up_.bind(build, name + ".q_up", s.q_rank, s.heads * s.qk(), false, m.init_std, build.split.split(0, {H * s.qk()}));
    q_norm_.bind_latent(build, name + ".q_norm", s.q_rank, group_);
  } else {
    q_.bind(build, name + ".q", C, s.heads * s.qk(), false, m.init_std, build.split.split(0, {H * s.qk()}));
  }
  down_.bind(build, name + ".down", C, s.down(), false, m.init_std);

  Arena& core = recompute_core_ ? build.recomputed : build.activations;
  q_latent_.clear();
  q_normed_.clear();
  kv_latent_.clear();
  kv_normed_.clear();
  qkv_.clear();
  out_padded_.clear();
  lse_.clear();
  out_.clear();
  for (int slot = 0; slot < build.slots; ++slot) {
    if (s.q_rank > 0) {
      q_latent_.push_back(build.take(build.activations, s.q_rank));
      q_normed_.push_back(build.take(build.activations, s.q_rank));
    }
    kv_latent_.push_back(build.take(build.activations, s.kv_rank));
    kv_normed_.push_back(build.take(build.activations, s.kv_rank));
    qkv_.push_back(build.take(build.activations, s.core().qkv_width()));
    out_padded_.push_back(build.take(core, s.heads * s.qk()));
    lse_.push_back(core.take({build.micro_batch, s.heads, build.seq()}, build.stat_dtype));
    out_.push_back(build.take(core, s.heads * s.value));
  }
}

Tensor LatentAttention::lse_of(const Batch& batch) const {
  const Tensor& all = lse_[static_cast<size_t>(batch.slot)];
  return all.view({all.numel()}).slice(0, batch.b * shape_.heads * batch.t);
}

Tensor LatentAttention::whole_input(const Batch& batch, const Tensor& x) const {
  return sequence_ ? sequence_->gather(batch, x) : x;
}

void LatentAttention::forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x,
                              const LatentScratch& scratch) const {
  const size_t slot = static_cast<size_t>(batch.slot);
  const LatentShape& s = shape_;
  const Tensor whole = whole_input(batch, x), down = as_matrix(batch.of(scratch.down));
  down_.forward(ops, down, whole);
  // The latents out of the down-projection's columns, each normed into its up-projection.
  const Tensor kv_latent = batch.of(kv_latent_[slot]), kv_normed = batch.of(kv_normed_[slot]);
  ops.take_columns(as_matrix(kv_latent), down, s.q_rank, 1.0);
  kv_norm_.forward(ops, batch, kv_normed, kv_latent);
  kv_up_.forward(ops, batch.of(scratch.kv), kv_normed);
  if (s.q_rank > 0) {
    const Tensor q_latent = batch.of(q_latent_[slot]), q_normed = batch.of(q_normed_[slot]);
    ops.take_columns(as_matrix(q_latent), down, 0, 1.0);
    q_norm_.forward(ops, batch, q_normed, q_latent);
    q_up_.forward(ops, batch.of(scratch.q), q_normed);
  } else {
    q_.forward(ops, batch.of(scratch.q), whole);
  }
  if (q_scale_ != 1) ops.scale(batch.of(scratch.q), q_scale_);
  const Tensor qkv = batch.of(qkv_[slot]);
  assemble(ops, batch, qkv, scratch);
  ops.rope_forward(qkv, rope_table_, s.core(), batch.positions);
  attend(ops, batch, batch.of(out_padded_[slot]), lse_of(batch), qkv, batch.of(out_[slot]));
  proj_.forward(ops, batch, y, batch.of(out_[slot]));
}

void LatentAttention::assemble(Ops& ops, const Batch& batch, const Tensor& qkv, const LatentScratch& scratch) const {
  const LatentShape& s = shape_;
  const int64_t H = s.heads, D = s.qk(), keys = H * D, values = 2 * H * D;
  const Tensor fused = as_matrix(qkv), q = as_matrix(batch.of(scratch.q)), kv = as_matrix(batch.of(scratch.kv));
  const Tensor down = as_matrix(batch.of(scratch.down));
  ops.fill(fused, 0.0);  // the value heads' padding
  ops.copy_head_columns(fused, q, {1, keys, 0, 0, 0, 0});
  ops.copy_head_columns(fused, kv, {H, s.nope, keys, D, 0, s.kv()});
  ops.copy_head_columns(fused, down, {H, s.rope, keys + s.nope, D, s.q_rank + s.kv_rank, 0});
  ops.copy_head_columns(fused, kv, {H, s.value, values, D, s.nope, s.kv()});
}

void LatentAttention::disassemble(Ops& ops, const Batch& batch, const LatentScratch& scratch,
                                  const Tensor& dqkv) const {
  const LatentShape& s = shape_;
  const int64_t H = s.heads, D = s.qk(), keys = H * D, values = 2 * H * D;
  const Tensor fused = as_matrix(dqkv), dq = as_matrix(batch.of(scratch.q)), dkv = as_matrix(batch.of(scratch.kv));
  ops.copy_head_columns(dq, fused, {1, keys, 0, 0, 0, 0});
  ops.copy_head_columns(dkv, fused, {H, s.nope, 0, s.kv(), keys, D});
  ops.copy_head_columns(dkv, fused, {H, s.value, s.nope, s.kv(), values, D});
  // Every head read the one RoPE key: its gradient is theirs summed, into the down-projection's
  // output gradient beside the latents'.
  ops.copy_head_columns(as_matrix(batch.of(scratch.down)), fused, {H, s.rope, s.q_rank + s.kv_rank, 0, keys + s.nope, D});
}

void LatentAttention::attend(Ops& ops, const Batch& batch, const Tensor& out_padded, const Tensor& lse,
                             const Tensor& qkv, const Tensor& out) const {
  const LatentShape& s = shape_;
  if (context_) context_->attention_forward(ops, batch, out_padded, lse, qkv, s.core());
  else ops.attention_forward(out_padded, lse, qkv, s.core(), batch.key_starts);
  ops.copy_head_columns(as_matrix(out), as_matrix(out_padded), {s.heads, s.value, 0, s.value, 0, s.qk()});
}

void LatentAttention::backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                               const Tensor& d_attn, const Tensor& d_qkv, const LatentScratch& scratch) const {
  const size_t slot = static_cast<size_t>(batch.slot);
  const LatentShape& s = shape_;
  const Tensor qkv = batch.of(qkv_[slot]), out_padded = batch.of(out_padded_[slot]), out = batch.of(out_[slot]);
  const Tensor lse = lse_of(batch);
  if (recompute_core_) attend(ops, batch, out_padded, lse, qkv, out);
  const Tensor d_out = batch.of(scratch.d_out);
  proj_.backward(ops, batch, d_out, dy, out);
  // The padded output's gradient: the value part's, zero in the padding.
  const Tensor d_padded = batch.of(d_attn), dqkv = batch.of(d_qkv);
  ops.fill(d_padded, 0.0);
  ops.copy_head_columns(as_matrix(d_padded), as_matrix(d_out), {s.heads, s.value, 0, s.qk(), 0, s.value});
  if (context_) context_->attention_backward(ops, batch, dqkv, d_padded, qkv, out_padded, lse, s.core());
  else ops.attention_backward(dqkv, d_padded, qkv, out_padded, lse, s.core(), batch.key_starts);
  ops.rope_backward(dqkv, rope_table_, s.core(), batch.positions);
  disassemble(ops, batch, scratch, dqkv);
  if (q_scale_ != 1) ops.scale(batch.of(scratch.q), q_scale_);

  // This rank's heads' part of the latents' gradients, into the down-projection's output
  // gradient beside the RoPE key's.
  const Tensor down = as_matrix(batch.of(scratch.down));
  const Tensor d_kv_normed = batch.of(scratch.d_kv_normed), d_kv_latent = batch.of(scratch.d_kv_latent);
  kv_up_.backward(ops, batch, d_kv_normed, batch.of(scratch.kv), batch.of(kv_normed_[slot]));
  ops.fill(d_kv_latent, 0.0);
  kv_norm_.backward(ops, batch, d_kv_latent, d_kv_normed, batch.of(kv_latent_[slot]));
  ops.copy_head_columns(down, as_matrix(d_kv_latent), {1, s.kv_rank, s.q_rank, 0, 0, 0});
  const Tensor whole = whole_input(batch, x);
  if (s.q_rank > 0) {
    const Tensor d_q_normed = batch.of(scratch.d_q_normed), d_q_latent = batch.of(scratch.d_q_latent);
    q_up_.backward(ops, batch, d_q_normed, batch.of(scratch.q), batch.of(q_normed_[slot]));
    ops.fill(d_q_latent, 0.0);
    q_norm_.backward(ops, batch, d_q_latent, d_q_normed, batch.of(q_latent_[slot]));
    ops.copy_head_columns(down, as_matrix(d_q_latent), {1, s.q_rank, 0, 0, 0, 0});
  }
  // The input's gradient, this rank's part: summed over the tensor group at the end.
  const Tensor d_whole = sequence_ ? sequence_->whole(batch) : dx;
  // A deferred weight gradient is summed in backward_weights.
  const auto down_backward = [&] { down_.backward(ops, batch, d_whole, batch.of(scratch.down), whole); };
  if (batch.defer_weights) down_backward();
  else ShareGradients(group_).sum(ops, {&down_.weight()}, down_backward);
  if (s.q_rank == 0) {
    const Tensor part = batch.of(scratch.d_input_part);
    q_.backward(ops, batch, part, batch.of(scratch.q), whole);
    ops.add(d_whole, d_whole, part);
  }
  if (sequence_) sequence_->scatter(dx, d_whole);
  else if (group_) group_->all_reduce(dx, ReduceOp::Sum);
}

void LatentAttention::backward_weights(Ops& ops, const Batch& batch) const {
  const int64_t rows = batch.b * batch.t;
  proj_.backward_weights(ops, batch);
  kv_up_.backward_weights(ops, batch.slot, rows);
  kv_norm_.backward_weights(ops, batch);
  if (shape_.q_rank > 0) {
    q_up_.backward_weights(ops, batch.slot, rows);
    q_norm_.backward_weights(ops, batch);
  }
  ShareGradients(group_).sum(ops, {&down_.weight()}, [&] { down_.backward_weights(ops, batch.slot, rows); });
  if (shape_.q_rank == 0) q_.backward_weights(ops, batch.slot, rows);
}

}  // namespace kiln
