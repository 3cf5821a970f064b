#include "trainer/model/qk_norm.h"

#include "trainer/model/sequence_parallel.h"

namespace kiln {

void QkHeadRows::take(Arena& constants, Arena& scratch, int64_t tokens, AttentionShape heads, DType dtype) {
  heads_ = heads;
  tokens_ = tokens;
  const int64_t H = heads.n_head + 2 * heads.n_kv_head, normed = heads.n_head + heads.n_kv_head;
  staging_ = scratch.take({tokens * (H + normed), heads.head_dim}, dtype);
  gradients_ = scratch.take({tokens * normed, heads.head_dim}, dtype);
  query_rows_ = constants.take({tokens * heads.n_head}, DType::I32);
  key_rows_ = constants.take({tokens * heads.n_kv_head}, DType::I32);
  fused_rows_ = constants.take({tokens * H}, DType::I32);
}

void QkHeadRows::fill(Ops& ops) const {
  const int64_t q = heads_.n_head, kv = heads_.n_kv_head, H = q + 2 * kv;
  // The normalised blocks follow the fused region; rows of the fused layout are token-major.
  const int64_t normed_queries = tokens_ * H, normed_keys = normed_queries + tokens_ * q;
  std::vector<int32_t> queries, keys, fused;
  for (int64_t n = 0; n < tokens_; ++n) {
    for (int64_t h = 0; h < q; ++h) queries.push_back(static_cast<int32_t>(n * H + h));
    for (int64_t h = 0; h < kv; ++h) keys.push_back(static_cast<int32_t>(n * H + q + h));
  }
  for (int64_t n = 0; n < tokens_; ++n) {
    for (int64_t h = 0; h < q; ++h) fused.push_back(static_cast<int32_t>(normed_queries + n * q + h));
    for (int64_t h = 0; h < kv; ++h) fused.push_back(static_cast<int32_t>(normed_keys + n * kv + h));
    for (int64_t h = 0; h < kv; ++h) fused.push_back(static_cast<int32_t>(n * H + q + kv + h));
  }
  ops.copy_from_host(query_rows_, queries.data());
  ops.copy_from_host(key_rows_, keys.data());
  ops.copy_from_host(fused_rows_, fused.data());
}

Tensor QkHeadRows::fused(const Batch& batch) const {
  const int64_t width = heads_.qkv_width();
  return staging_.slice(0, batch.b * batch.t * width / heads_.head_dim).view({batch.b, batch.t, width});
}

Tensor QkHeadRows::take_heads(Arena& arena, DType dtype) const {
  return arena.take({tokens_ * (heads_.n_head + heads_.n_kv_head), heads_.head_dim}, dtype);
}

Tensor QkHeadRows::take_rstd(Arena& arena, DType stat_dtype) const {
  return arena.take({tokens_ * (heads_.n_head + heads_.n_kv_head)}, stat_dtype);
}

void QkHeadRows::forward(Ops& ops, const Batch& batch, const Tensor& qkv, const Tensor& heads, const Tensor& rstd,
                         const Tensor& q_weight, const Tensor& k_weight, double eps) const {
  const int64_t n = batch.b * batch.t, q = n * heads_.n_head, kv = n * heads_.n_kv_head;
  const Tensor normed = staging_.slice(tokens_ * (heads_.n_head + 2 * heads_.n_kv_head), staging_.shape[0]);
  ops.gather_rows(query_block(heads, n), staging_, query_rows_.slice(0, q), Tensor{});
  ops.gather_rows(key_block(heads, n), staging_, key_rows_.slice(0, kv), Tensor{});
  ops.rmsnorm_forward(query_block(normed, n), query_block(rstd, n), query_block(heads, n), q_weight, eps);
  ops.rmsnorm_forward(key_block(normed, n), key_block(rstd, n), key_block(heads, n), k_weight, eps);
  ops.gather_rows(as_matrix(qkv).view({q + 2 * kv, heads_.head_dim}), staging_,
                  fused_rows_.slice(0, q + 2 * kv), Tensor{});
}

void QkHeadRows::backward(Ops& ops, const Batch& batch, const Tensor& d_fused, const Tensor& heads,
                          const Tensor& rstd, const Tensor& q_weight, const Tensor& k_weight,
                          const Tensor& dq_weight, const Tensor& dk_weight, const Tensor& kept_gradients) const {
  const int64_t n = batch.b * batch.t, q = n * heads_.n_head, kv = n * heads_.n_kv_head;
  // The norms' input gradients take the normalised heads' place, so the same gather that
  // assembled forward's output assembles the projection's gradient.
  const Tensor d_heads = staging_.slice(tokens_ * (heads_.n_head + 2 * heads_.n_kv_head), staging_.shape[0]);
  ops.gather_rows(query_block(gradients_, n), staging_, query_rows_.slice(0, q), Tensor{});
  ops.gather_rows(key_block(gradients_, n), staging_, key_rows_.slice(0, kv), Tensor{});
  if (!kept_gradients.empty()) ops.cast(kept_gradients, gradients_);
  ops.fill(query_block(d_heads, n), 0.0);
  ops.fill(key_block(d_heads, n), 0.0);
  ops.rmsnorm_backward(query_block(d_heads, n), dq_weight, query_block(gradients_, n), query_block(heads, n),
                       q_weight, query_block(rstd, n));
  ops.rmsnorm_backward(key_block(d_heads, n), dk_weight, key_block(gradients_, n), key_block(heads, n), k_weight,
                       key_block(rstd, n));
  ops.gather_rows(as_matrix(d_fused).view({q + 2 * kv, heads_.head_dim}), staging_,
                  fused_rows_.slice(0, q + 2 * kv), Tensor{});
}

void QkHeadRows::weight_gradients(Ops& ops, const Batch& batch, const Tensor& heads, const Tensor& rstd,
                                  const Tensor& gradients, const Tensor& q_weight, const Tensor& k_weight,
                                  const Tensor& dq_weight, const Tensor& dk_weight) const {
  const int64_t n = batch.b * batch.t;
  ops.rmsnorm_backward(Tensor{}, dq_weight, query_block(gradients, n), query_block(heads, n), q_weight,
                       query_block(rstd, n));
  ops.rmsnorm_backward(Tensor{}, dk_weight, key_block(gradients, n), key_block(heads, n), k_weight,
                       key_block(rstd, n));
}

void QkNorm::bind(const LayerBuild& build, const std::string& name) {
  rows_ = build.qk_heads;
  eps_ = build.model.norm_eps;
  const int64_t D = build.model.head_dim();
  q_weight_ = build.params.add(name + ".q_norm.weight", {D}, Init::Ones);
  k_weight_ = build.params.add(name + ".k_norm.weight", {D}, Init::Ones);
  tensor_group_ = build.split.tensor;
  heads_.clear();
  rstd_.clear();
  kept_.clear();
  for (int s = 0; s < build.slots; ++s) {
    heads_.push_back(rows_->take_heads(build.activations, build.dtype));
    rstd_.push_back(rows_->take_rstd(build.activations, build.stat_dtype));
    if (!build.weight_inputs || q_weight_.frozen) continue;
    Arena& kept = *build.weight_inputs;
    kept_.push_back({rows_->take_heads(kept, build.dtype), rows_->take_rstd(kept, build.stat_dtype),
                     rows_->take_heads(kept, build.dtype)});
  }
}

void QkNorm::forward(Ops& ops, const Batch& batch, const Tensor& qkv) const {
  const size_t s = static_cast<size_t>(batch.slot);
  rows_->forward(ops, batch, qkv, heads_[s], rstd_[s], q_weight_.value, k_weight_.value, eps_);
}

void QkNorm::backward(Ops& ops, const Batch& batch, const Tensor& d_fused) const {
  const size_t s = static_cast<size_t>(batch.slot);
  if (batch.defer_weights && !q_weight_.frozen) {
    const Kept& k = kept_[s];
    ops.cast(k.heads, heads_[s]);
    ops.cast(k.rstd, rstd_[s]);
    rows_->backward(ops, batch, d_fused, heads_[s], rstd_[s], q_weight_.value, k_weight_.value, Tensor{}, Tensor{},
                    k.gradients);
    return;
  }
  ShareGradients(tensor_group_).sum(ops, {&q_weight_, &k_weight_}, [&] {
    rows_->backward(ops, batch, d_fused, heads_[s], rstd_[s], q_weight_.value, k_weight_.value, q_weight_.grad,
                    k_weight_.grad);
  });
}

void QkNorm::backward_weights(Ops& ops, const Batch& batch) const {
  if (q_weight_.frozen) return;
  const Kept& k = kept_[static_cast<size_t>(batch.slot)];
  ShareGradients(tensor_group_).sum(ops, {&q_weight_, &k_weight_}, [&] {
    rows_->weight_gradients(ops, batch, k.heads, k.rstd, k.gradients, q_weight_.value, k_weight_.value,
                            q_weight_.grad, k_weight_.grad);
  });
}

}  // namespace kiln
