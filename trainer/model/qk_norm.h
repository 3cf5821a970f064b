// Qwen3's normalised heads (model.qk_norm): after the fused query/key/value projection and
// before RoPE, each query head's head_dim values go through RMSNorm with the weight q_norm,
// each key head's with k_norm (both [head_dim], the model's norm_eps); value heads pass as
// they are. This is transformers' Qwen3Attention.
//
// The projection's output [N, (n_head + 2 n_kv_head) head_dim] holds each token's heads side
// by side, and the RMSNorm op normalises the rows of one matrix with one weight. So the heads
// move by row gathers between that fused layout and head blocks: every token's query heads in
// one block of [N n_head, head_dim] rows, the key heads in another, each one RMSNorm call; one
// more gather puts the normalised heads and the untouched value heads back in the fused layout
// attention reads. Backward runs the same moves on the gradients.
//
// Under tensor parallelism each rank holds its own heads (a slice of the projection's rows)
// and the two weights whole, so each rank's weight gradients are sums over its heads only:
// they are summed over the tensor group (Hugging Face's "replicated_with_grad_allreduce").
#pragma once

#include <string>
#include <vector>

#include "trainer/model/layer_build.h"

namespace kiln {

// The row moves and the staging buffer for up to `tokens` tokens of one rank's heads, shared
// by every layer (and the decoder's own). Row r of the staging buffer, seen as
// [rows, head_dim], is: r < tokens H (H = the heads of a token), the fused projection
// output, token-major; then `tokens` n_head normalised query heads; then `tokens` n_kv_head
// normalised key heads. A micro-batch of fewer tokens uses the leading rows of each region.
class QkHeadRows {
 public:
  // Lays out the row indices (in `constants`) and the staging buffer (in `scratch`).
  void take(Arena& constants, Arena& scratch, int64_t tokens, AttentionShape heads, DType dtype);
  // After the arenas are allocated: the row indices.
  void fill(Ops& ops) const;

  // Where the projection writes a micro-batch's raw qkv and where attention's backward writes
  // its gradient: the staging buffer's first region as [b, t, qkv_width].
  Tensor fused(const Batch& batch) const;
  // What a layer keeps for backward: the query and key heads before the norm ([rows,
  // head_dim]) and their inverse RMS ([rows]), each the query block then the key block.
  Tensor take_heads(Arena& arena, DType dtype) const;
  Tensor take_rstd(Arena& arena, DType stat_dtype) const;

  // qkv [b, t, qkv_width] = fused(batch) with its query and key heads normalised; saves the
  // heads before the norm and their statistics.
  void forward(Ops& ops, const Batch& batch, const Tensor& qkv, const Tensor& heads, const Tensor& rstd,
               const Tensor& q_weight, const Tensor& k_weight, double eps) const;
  // d_fused (overwritten) = the gradient of the projection's output, from the gradient of
  // the normalised qkv in fused(batch) (which it overwrites); the weights' gradients
  // accumulate unless they are empty (frozen, or a split backward's input-gradient pass,
  // which copies the norms' output gradients into kept_gradients, laid out as take_heads').
  void backward(Ops& ops, const Batch& batch, const Tensor& d_fused, const Tensor& heads, const Tensor& rstd,
                const Tensor& q_weight, const Tensor& k_weight, const Tensor& dq_weight, const Tensor& dk_weight,
                const Tensor& kept_gradients = {}) const;
  // A split backward's weight pass: the weights' gradients alone, from copies of the heads
  // before the norm, of their statistics and of the norms' output gradients.
  void weight_gradients(Ops& ops, const Batch& batch, const Tensor& heads, const Tensor& rstd,
                        const Tensor& gradients, const Tensor& q_weight, const Tensor& k_weight,
                        const Tensor& dq_weight, const Tensor& dk_weight) const;

 private:
  // Rows [begin, begin + count) of a [rows, ...] tensor.
  static Tensor rows_of(const Tensor& t, int64_t begin, int64_t count) { return t.slice(begin, begin + count); }
  // The query and key blocks of a micro-batch of n tokens in a tensor laid out as take_heads'.
  Tensor query_block(const Tensor& t, int64_t n) const { return rows_of(t, 0, n * heads_.n_head); }
  Tensor key_block(const Tensor& t, int64_t n) const {
    return rows_of(t, tokens_ * heads_.n_head, n * heads_.n_kv_head);
  }

  AttentionShape heads_;
  int64_t tokens_ = 0;
  Tensor staging_;       // [tokens (H + n_head + n_kv_head), head_dim]
  Tensor gradients_;     // [tokens (n_head + n_kv_head), head_dim]: the norms' output gradients
  Tensor query_rows_;    // [tokens n_head] I32: the staging row of each query head
  Tensor key_rows_;      // [tokens n_kv_head] I32: the staging row of each key head
  Tensor fused_rows_;    // [tokens H] I32: where each row of the fused layout comes from
};

// The normalised heads of one attention layer: its two weights and what its backward reads.
class QkNorm {
 public:
  void bind(const LayerBuild& build, const std::string& name);
  // The projection writes here; forward normalises it into qkv.
  Tensor fused(const Batch& batch) const { return rows_->fused(batch); }
  void forward(Ops& ops, const Batch& batch, const Tensor& qkv) const;
  // d_fused (overwritten) from the gradient in fused(batch); weight gradients accumulate, or
  // with batch.defer_weights wait for backward_weights, from copies kept in the slot.
  void backward(Ops& ops, const Batch& batch, const Tensor& d_fused) const;
  void backward_weights(Ops& ops, const Batch& batch) const;

 private:
  const QkHeadRows* rows_ = nullptr;
  Communicator* tensor_group_ = nullptr;  // sums the weights' gradients over the heads' ranks
  double eps_ = 1e-6;
  Parameter q_weight_, k_weight_;
  std::vector<Tensor> heads_, rstd_;  // per slot
  // A split backward's copies, per slot (LayerBuild::weight_inputs): the heads, their
  // statistics and the norms' output gradients.
  struct Kept {
    Tensor heads, rstd, gradients;
  };
  std::vector<Kept> kept_;
};

}  // namespace kiln
