// Latent attention (latent_attention.h) in generation, with DeepSeek's cache of the latent
// instead of every head's keys and values. Each position keeps its normed key/value latent c
// (kv_lora_rank values) and its turned RoPE key (qk_rope_head_dim), one row for all heads.
//
// Attention is then multi-query attention over that row, with the up-projection absorbed
// (DeepSeek-V2's inference form): head h's query meets c through W_uk_h (its key rows of
// Wkv_up, [qk_nope, kv_lora_rank]),
//   q_h k_h^T = (q_nope_h W_uk_h) c^T + q_rope_h k_rope^T,
// so its query becomes [q_nope_h W_uk_h | q_rope_h] against the key [c | k_rope]; its output
// is the weighted sum of the c's, which W_uv_h (its value rows) turns into the head's values.
// kiln's decode kernel takes one width for keys and values, so the value cache holds c
// padded with zeros to the key's width: 2 (kv_lora_rank + qk_rope_head_dim) values a position
// and layer, against 2 n_head (qk_nope + qk_rope) for whole keys and values.
//
// The kernel scales scores by 1 / sqrt(kv_lora_rank + qk_rope_head_dim); the queries are
// scaled to give the model's 1 / sqrt(qk_nope + qk_rope) (with YaRN's mscale^2). The per-head products run one head
// at a time (2 n_head small products a layer and chunk).
#pragma once

#include "trainer/memory/arena.h"
#include "trainer/config/config.h"
#include "kernels/ops.h"

namespace kiln {

// One layer's latent-attention weights, as the trained model holds them.
struct LatentDecodeWeights {
  Tensor down, q_norm, q_up, q, kv_norm, kv_up, proj;  // q_norm and q_up, or q
};

class LatentDecode {
 public:
  // The decode kernel's view: n_head query heads over one key/value head of the cache's width.
  static AttentionShape heads(const ModelConfig& m);

  // Buffers for `batch` sequences of up to `chunk` positions.
  void take(Arena& arena, const ModelConfig& m, int64_t batch, int64_t chunk, DType dtype, DType stat_dtype);
  // y [B, t, C] = the layer's attention over x [B, t, C] (normed) at positions pos.., the
  // chunk's latents written into the caches [B, seq_len, kv_lora_rank + qk_rope_head_dim].
  // qkv and attn: the decoder's [B, chunk, ...] buffers of heads(m)'s widths; rope: the
  // table's rows of these positions.
  void forward(Ops& ops, const LatentDecodeWeights& w, const Tensor& y, const Tensor& x, const Tensor& qkv,
               const Tensor& attn, const Tensor& rope, const Tensor& k_cache, const Tensor& v_cache,
               int64_t pos) const;

 private:
  // The first n rows of `width` values of a buffer, as a [n, width] matrix (a chunk's rows
  // of a [B, chunk, ...] buffer, packed).
  static Tensor packed(const Tensor& t, int64_t n, int64_t width) {
    return t.view({t.numel()}).slice(0, n * width).view({n, width});
  }
  static Tensor rows(const Tensor& t, int64_t n) { return packed(t, n, t.shape[t.shape.rank - 1]); }

  int64_t H_ = 0, nope_ = 0, rope_ = 0, value_ = 0, q_rank_ = 0, kv_rank_ = 0;
  double eps_ = 1e-6;
  double q_scale_ = 1;  // the queries' factor, the kernel's scale to the model's
  Tensor down_, q_, q_latent_, q_normed_, latent_, normed_latent_, rstd_, out_;
  Tensor head_in_, head_out_;  // one head's [rows, max(qk_nope, kv_rank)] and [rows, max(kv_rank, v)]
};

}  // namespace kiln
