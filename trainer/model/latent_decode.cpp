#include "trainer/model/latent_decode.h"

#include <algorithm>
#include <cmath>

#include "trainer/model/rope_frequencies.h"

namespace kiln {

AttentionShape LatentDecode::heads(const ModelConfig& m) {
  const int width = m.kv_lora_rank + m.qk_rope_head_dim;
  return {m.n_head, 1, width, m.qk_rope_head_dim};
}

void LatentDecode::take(Arena& arena, const ModelConfig& m, int64_t batch, int64_t chunk, DType dtype,
                        DType stat_dtype) {
  H_ = m.n_head;
  nope_ = m.qk_nope_head_dim;
  rope_ = m.qk_rope_head_dim;
  value_ = m.v_head_dim;
  q_rank_ = m.q_lora_rank;
  kv_rank_ = m.kv_lora_rank;
  eps_ = m.norm_eps;
  const double L = kv_rank_ + rope_, D = nope_ + rope_;
  q_scale_ = std::sqrt(L / D) * latent_softmax_factor(m);
  const int64_t B = batch, R = chunk;
  down_ = arena.take({B, R, q_rank_ + kv_rank_ + rope_}, dtype);
  q_ = arena.take({B, R, H_ * (nope_ + rope_)}, dtype);
  if (q_rank_ > 0) {
    q_latent_ = arena.take({B, R, q_rank_}, dtype);
    q_normed_ = arena.take({B, R, q_rank_}, dtype);
  }
  latent_ = arena.take({B, R, kv_rank_}, dtype);
  normed_latent_ = arena.take({B, R, kv_rank_}, dtype);
  rstd_ = arena.take({B, R}, stat_dtype);
  out_ = arena.take({B, R, H_ * value_}, dtype);
  head_in_ = arena.take({B, R, std::max(nope_, kv_rank_)}, dtype);
  head_out_ = arena.take({B, R, std::max(kv_rank_, value_)}, dtype);
}

void LatentDecode::forward(Ops& ops, const LatentDecodeWeights& w, const Tensor& y, const Tensor& x,
                           const Tensor& qkv, const Tensor& attn, const Tensor& rope, const Tensor& k_cache,
                           const Tensor& v_cache, int64_t pos) const {
  const int64_t n = x.shape[0] * x.shape[1], D = nope_ + rope_, L = kv_rank_ + rope_;
  const Tensor in = rows(x, n), down = rows(down_, n), q = rows(q_, n), stats = rstd_.view({rstd_.numel()}).slice(0, n);
  ops.matmul(down, in, false, w.down, true, false);
  if (q_rank_ > 0) {
    ops.take_columns(rows(q_latent_, n), down, 0, 1.0);
    ops.rmsnorm_forward(rows(q_normed_, n), stats, rows(q_latent_, n), w.q_norm, eps_);
    ops.matmul(q, rows(q_normed_, n), false, w.q_up, true, false);
  } else {
    ops.matmul(q, in, false, w.q, true, false);
  }
  ops.scale(q, q_scale_);
  const Tensor latent = rows(latent_, n), normed = rows(normed_latent_, n);
  ops.take_columns(latent, down, q_rank_, 1.0);
  ops.rmsnorm_forward(normed, stats, latent, w.kv_norm, eps_);

  // The multi-query rows: H queries [q_nope_h W_uk_h | q_rope_h], the key [c | k_rope], the
  // value [c | 0].
  const Tensor fused = rows(qkv, n), q_nope = packed(head_in_, n, nope_), q_latent = packed(head_out_, n, kv_rank_);
  ops.fill(fused, 0.0);
  for (int64_t h = 0; h < H_; ++h) {
    ops.copy_head_columns(q_nope, q, {1, nope_, 0, 0, h * D, 0});
    const Tensor key_rows = w.kv_up.slice(h * (nope_ + value_), h * (nope_ + value_) + nope_);
    ops.matmul(q_latent, q_nope, false, key_rows, false, false);
    ops.copy_head_columns(fused, q_latent, {1, kv_rank_, h * L, 0, 0, 0});
  }
  ops.copy_head_columns(fused, q, {H_, rope_, kv_rank_, L, nope_, D});
  ops.copy_head_columns(fused, normed, {1, kv_rank_, H_ * L, 0, 0, 0});
  ops.copy_head_columns(fused, down, {1, rope_, H_ * L + kv_rank_, 0, q_rank_ + kv_rank_, 0});
  ops.copy_head_columns(fused, normed, {1, kv_rank_, (H_ + 1) * L, 0, 0, 0});
  const AttentionShape shape{static_cast<int>(H_), 1, static_cast<int>(L), static_cast<int>(rope_)};
  ops.rope_forward(qkv, rope, shape, Tensor{});
  ops.attention_decode(attn, k_cache, v_cache, qkv, pos, shape);

  // Each head's weighted latent through its value rows.
  const Tensor out = rows(out_, n), heads_out = rows(attn, n);
  const Tensor weighted = packed(head_in_, n, kv_rank_), values = packed(head_out_, n, value_);
  for (int64_t h = 0; h < H_; ++h) {
    ops.copy_head_columns(weighted, heads_out, {1, kv_rank_, 0, 0, h * L, 0});
    const Tensor value_rows = w.kv_up.slice(h * (nope_ + value_) + nope_, (h + 1) * (nope_ + value_));
    ops.matmul(values, weighted, false, value_rows, true, false);
    ops.copy_head_columns(out, values, {1, value_, h * value_, 0, 0, 0});
  }
  ops.matmul(rows(y, n), out, false, w.proj, true, false);
}

}  // namespace kiln
