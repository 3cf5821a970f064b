// Megatron's context parallelism (parallel.cp) over the context group of cp ranks.
//
// Each sequence of T tokens is cut into 2 cp chunks, and rank r holds chunks r and
// 2 cp - 1 - r: under the causal mask the early chunks see few keys and the late ones many,
// so every rank gets one of each and the same work. Every layer but attention runs on the
// rank's own T / cp tokens (their positions, for the embedding and RoPE, are their places in
// the whole sequence). Attention is ring attention: the key and value heads (not the query
// heads: grouped-query heads pass n_kv_head of them) travel around the ring, each rank's
// queries meeting every rank's block in turn, the next block's transfer running while this
// one's attention computes; the blocks' softmaxes merge by log-sum-exp. Backward passes the
// blocks around again with their dK and dV accumulators, which come home after cp steps.
#pragma once

#include <vector>

#include "trainer/model/layer_build.h"

namespace kiln {

// The whole sequence's token indices rank r of cp holds, in its row order.
std::vector<int32_t> context_tokens(int64_t seq_len, int cp, int rank);

class ContextParallel {
 public:
  // Lays out the ring's buffers (two blocks of keys and values, two of their gradients, in
  // the scratch arena) and every rank's token indices (in the activations arena).
  void bind(const LayerBuild& build);
  // After the arenas are allocated: the token indices.
  void fill_indices(Ops& ops) const;
  // The whole sequence's token indices this rank holds, in row order.
  const std::vector<int32_t>& tokens() const { return mine_; }

  // out [b, t, n_head * head_dim] and lse [b, n_head, t] of this rank's queries over the whole
  // sequence's keys; qkv [b, t, qkv_width] is this rank's (t = T / cp).
  void attention_forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& lse, const Tensor& qkv,
                         AttentionShape shape) const;
  // dqkv (overwritten) from dout and forward's out and lse.
  void attention_backward(Ops& ops, const Batch& batch, const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                          const Tensor& out, const Tensor& lse, AttentionShape shape) const;

 private:
  Communicator* group_ = nullptr;
  int64_t seq_len_ = 0;
  std::vector<int32_t> mine_;   // this rank's, on the host
  std::vector<Tensor> tokens_;  // per rank of the group: [T / cp] I32
  Tensor kv_[2], dkv_[2];       // [micro_batch, T / cp, 2 * n_kv_head * head_dim]
};

}  // namespace kiln
