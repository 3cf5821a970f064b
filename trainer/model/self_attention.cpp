#include "trainer/model/self_attention.h"

#include <cmath>

#include "trainer/config/lora_targets.h"

namespace kiln {

void SelfAttention::bind(const LayerBuild& build, const std::string& name,
                         const Tensor& rope_table) {
  const ModelConfig& m = build.model;
  const int tp = build.split.tp();
  shape_ = {m.n_head / tp, m.kv_heads() / tp, m.head_dim()};  // this rank's heads
  rope_ = m.is_llama();
  qk_norm_on_ = m.qk_norm;
  rope_table_ = rope_table;
  recompute_core_ = build.split.recompute == Recompute::Selective;
  context_ = build.context;
  Arena& core = recompute_core_ ? build.recomputed : build.activations;
  const bool bias = !m.is_llama();
  // GPT-2's scaled init: residual projections get std / sqrt(2 * n_layer).
  const int64_t q_width = int64_t{m.n_head} * m.head_dim();
  const int64_t kv_width = int64_t{m.kv_heads()} * m.head_dim();
  proj_.bind(build, name + ".proj", q_width, m.d_model, bias,
             m.init_std / std::sqrt(2.0 * m.n_layer), adapter_name(m, LoraTarget::O));
  qkv_.bind(build, name + ".qkv", m.d_model, {q_width, kv_width, kv_width}, m.has_qkv_bias(),
            m.init_std,
            {adapter_name(m, LoraTarget::Q), adapter_name(m, LoraTarget::K), adapter_name(m, LoraTarget::V)});
  if (qk_norm_on_) qk_norm_.bind(build, name);
  qkv_out_.clear();
  attn_out_.clear();
  lse_.clear();
  for (int s = 0; s < build.slots; ++s) {
    qkv_out_.push_back(build.take(build.activations, shape_.qkv_width()));
    attn_out_.push_back(build.take(core, int64_t{shape_.n_head} * shape_.head_dim));
    lse_.push_back(core.take({build.micro_batch, shape_.n_head, build.seq()}, build.stat_dtype));
  }
}

void SelfAttention::forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor qkv = batch.of(qkv_out_[s]);
  const Tensor out = batch.of(attn_out_[s]);
  const Tensor lse = lse_[s].view({lse_[s].numel()}).slice(0, batch.b * shape_.n_head * batch.t);
  if (qk_norm_on_) {
    qkv_.forward(ops, batch, qk_norm_.fused(batch), x);
    qk_norm_.forward(ops, batch, qkv);
  } else {
    qkv_.forward(ops, batch, qkv, x);
  }
  if (rope_) ops.rope_forward(qkv, rope_table_, shape_, batch.positions);
  attend(ops, batch, out, lse, qkv);
  proj_.forward(ops, batch, y, out);
}

void SelfAttention::backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy,
                             const Tensor& x, const BlockScratch& scratch) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor qkv = batch.of(qkv_out_[s]);
  const Tensor out = batch.of(attn_out_[s]);
  const Tensor lse = lse_[s].view({lse_[s].numel()}).slice(0, batch.b * shape_.n_head * batch.t);
  const Tensor d_attn = batch.of(scratch.d_attn);
  const Tensor d_qkv = batch.of(scratch.d_qkv);
  // The gradient of the normalised heads, which the norms' backward turns into d_qkv.
  const Tensor d_attended = qk_norm_on_ ? qk_norm_.fused(batch) : d_qkv;
  if (recompute_core_) attend(ops, batch, out, lse, qkv);
  proj_.backward(ops, batch, d_attn, dy, out);
  if (context_) context_->attention_backward(ops, batch, d_attended, d_attn, qkv, out, lse, shape_);
  else ops.attention_backward(d_attended, d_attn, qkv, out, lse, shape_, batch.key_starts);
  if (rope_) ops.rope_backward(d_attended, rope_table_, shape_, batch.positions);
  if (qk_norm_on_) qk_norm_.backward(ops, batch, d_qkv);
  qkv_.backward(ops, batch, dx, d_qkv, x);
}

void SelfAttention::backward_weights(Ops& ops, const Batch& batch) const {
  proj_.backward_weights(ops, batch);
  if (qk_norm_on_) qk_norm_.backward_weights(ops, batch);
  qkv_.backward_weights(ops, batch);
}

void SelfAttention::attend(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& lse,
                           const Tensor& qkv) const {
  if (context_) context_->attention_forward(ops, batch, out, lse, qkv, shape_);
  else ops.attention_forward(out, lse, qkv, shape_, batch.key_starts);
}

}  // namespace kiln
