// DeepSeek-V2/V3's multi-head latent attention (model.attention=mla), as transformers'
// DeepseekV3Attention computes it, with RoPE's rotate-half pairing (DeepSeek's checkpoints
// pair a head's dims interleaved: an import reorders those rows). Over the block's normed
// input x [N, C], with H heads, rq = q_lora_rank, rkv = kv_lora_rank, dn + dr a query and key
// head (without and with RoPE) and dv a value head:
//   q      = rmsnorm(x Wq_down^T) Wq_up^T          [N, H (dn + dr)], each head [nope | rope]
//            (x Wq^T when rq = 0)
//   kv     = rmsnorm(x Wkv_down^T) Wkv_up^T        [N, H (dn + dv)], each head [k nope | v]
//   k_rope = x Wk_rope^T                           [N, dr], one for every head
//   key head h = [k nope_h | k_rope]; RoPE turns the last dr dims of each query and key head;
//   attention over heads of dn + dr, scaled by 1 / sqrt(dn + dr) (times YaRN's mscale^2 under
//   model.rope_scaling=yarn, rope_frequencies.h, folded into the queries); out [N, H dv] Wproj^T.
// The attention core is kiln's own: the value heads are padded with zeros to the query heads'
// width, whose padding comes out of attention as zeros and is dropped. copy_head_columns
// moves the heads between the projections' layouts and the core's fused [q | k | v] one.
//
// Under context parallelism the core is ring attention over the padded heads (context_parallel.h).
//
// Under tensor parallelism each rank holds H / tp heads: the up-projections' rows and the
// output projection's columns (Megatron's). The down-projections, their norms and the RoPE key
// projection are whole on every rank, which computes them alike from the whole input
// (gathered under sequence parallelism). The gradients that reach them from this rank's heads
// are its part of the sum over the ranks, so their weights' gradients are summed over the
// tensor group, and so is the input's gradient (all-reduced, or reduce-scattered to the token
// shares), once, at the end.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/context_parallel.h"
#include "trainer/model/norm.h"
#include "trainer/model/tensor_parallel_linear.h"

namespace kiln {

// This rank's widths: its heads and their parts, and the latents'.
struct LatentShape {
  int64_t heads = 0;  // this rank's
  int64_t nope = 0, rope = 0, value = 0;
  int64_t q_rank = 0, kv_rank = 0;

  int64_t qk() const { return nope + rope; }
  int64_t kv() const { return nope + value; }
  // The down-projection's output: the query latent (none when q_rank = 0), the key and value
  // latent, the RoPE key.
  int64_t down() const { return q_rank + kv_rank + rope; }
  // The attention core's view: a key and value head for every query head, all qk() wide, the
  // last rope dims turned.
  AttentionShape core() const {
    return {static_cast<int>(heads), static_cast<int>(heads), static_cast<int>(qk()), static_cast<int>(rope)};
  }
};

// Buffers every layer uses in turn, [B, T, width]: the projections' outputs in forward, then
// their gradients in backward.
struct LatentScratch {
  Tensor q;     // [H (dn + dr)]
  Tensor kv;    // [H (dn + dv)]
  Tensor down;  // [rq + rkv + dr]
  Tensor d_out;                     // [H dv]: the output projection's input gradient
  Tensor d_q_normed, d_q_latent;    // [rq]
  Tensor d_kv_normed, d_kv_latent;  // [rkv]
  Tensor d_input_part;              // [C]: the query projection's, when q_lora_rank = 0

  void bind(const LayerBuild& build);
};

class LatentAttention {
 public:
  void bind(const LayerBuild& build, const std::string& name, const Tensor& rope_table);
  void forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x, const LatentScratch& scratch) const;
  // dx = input gradient (overwrites); parameter gradients accumulate (in backward_weights
  // when batch.defer_weights). d_attn and d_qkv: the block scratch's attention-core gradients.
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                const Tensor& d_attn, const Tensor& d_qkv, const LatentScratch& scratch) const;
  void backward_weights(Ops& ops, const Batch& batch) const;

 private:
  // The core's fused qkv from the projections' outputs in the scratch, and back: the
  // projections' output gradients (the RoPE key's summed over the heads) from the core's.
  void assemble(Ops& ops, const Batch& batch, const Tensor& qkv, const LatentScratch& scratch) const;
  void disassemble(Ops& ops, const Batch& batch, const LatentScratch& scratch, const Tensor& dqkv) const;
  // Attention, and the value part of its padded output.
  void attend(Ops& ops, const Batch& batch, const Tensor& out_padded, const Tensor& lse, const Tensor& qkv,
              const Tensor& out) const;
  // The slot's log-sum-exps of the micro-batch's [b, heads, t] rows.
  Tensor lse_of(const Batch& batch) const;
  // x whole: this rank's share gathered under sequence parallelism.
  Tensor whole_input(const Batch& batch, const Tensor& x) const;

  LatentShape shape_;
  Tensor rope_table_;
  bool recompute_core_ = false;  // train.recompute=selective
  // The queries' factor: the softmax scale's beyond the core's 1 / sqrt(qk) (YaRN's mscale^2).
  double q_scale_ = 1;
  Communicator* group_ = nullptr;  // the tensor group (null: tp = 1)
  const SequenceParallel* sequence_ = nullptr;
  const ContextParallel* context_ = nullptr;  // ring attention as the core under parallel.cp
  Linear down_;        // whole on every rank: [rq + rkv + dr, C]
  Linear q_up_, q_;    // this rank's heads: from the query latent, or (q_lora_rank = 0) from x
  Linear kv_up_;       // this rank's heads
  Norm q_norm_, kv_norm_;
  RowParallelLinear proj_;
  // Per slot: the latents before and after their norms, the core's input, its padded output
  // and log-sum-exps, the value part the output projection reads.
  std::vector<Tensor> q_latent_, q_normed_, kv_latent_, kv_normed_;
  std::vector<Tensor> qkv_, out_padded_, lse_, out_;
};

}  // namespace kiln
