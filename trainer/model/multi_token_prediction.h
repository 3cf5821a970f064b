// One module of DeepSeek-V3's multi-token prediction (model.mtp_depth; the DeepSeek-V3
// report, section 2.2). Module k (k = 1..D) reads, at position i, the previous depth's
// representation h[k-1][i] (h[0]: the main model's final norm output) and the embedding of
// the token k places ahead, e = embed(token[i + k]):
//   x = W [enorm(e) | hnorm(h[k-1])]      (W = [W_e | W_h], d_model x 2 d_model)
//   h[k] = norm(block(x))                 (one transformer block, the model's own kind)
// and the shared output layer turns h[k] into logits for token i + k + 1. The embedding, the
// output layer and the cross-entropy are the model's (gpt_model.h); the module is the rest.
//
// W is DeepSeek's eh_proj, [d_model, 2 d_model], the embedding's half first (Megatron's order),
// whole on every tensor rank: under sequence parallelism each rank projects its own tokens and
// W's gradient is summed over the group; without it every rank computes the same rows. The
// module lives on the chunk with the output layer (a pipeline's last stage, as Megatron
// places it).
#pragma once

#include <string>
#include <vector>

#include "trainer/model/linear.h"
#include "trainer/model/norm.h"
#include "trainer/model/transformer_block.h"

namespace kiln {

class MtpModule {
 public:
  // depth: 1..D. build lays out the module's own parameters and activations; block_build the
  // block's (its activations in the shared recomputed arena under full recomputation).
  void bind(const LayerBuild& build, const LayerBuild& block_build, int depth, const Tensor& rope_table);
  // h_out = h[k] from h_prev = h[k-1] and e = the embedding of the tokens k places ahead, each
  // this rank's token share [b, t / parts, C].
  void forward(Ops& ops, const Batch& batch, const Tensor& h_out, const Tensor& h_prev, const Tensor& e,
               const BlockScratch& scratch) const;
  // From d_h_out, the gradient of h_out: d_h_prev and d_e are overwritten with the gradients of
  // h_prev and e; the module's parameter gradients accumulate. dloss: each token's loss weight
  // (the block's MoE auxiliary losses take it).
  void backward(Ops& ops, const Batch& batch, const Tensor& d_h_prev, const Tensor& d_e, const Tensor& d_h_out,
                const Tensor& h_prev, const Tensor& e, const BlockScratch& scratch, double dloss) const;

  TransformerBlock& block() { return block_; }

 private:
  Norm enorm_, hnorm_, final_norm_;
  Linear eh_proj_;
  TransformerBlock block_;
  const SequenceParallel* sequence_ = nullptr;
  bool recompute_block_ = false;  // full recomputation: the block's forward re-runs in backward
  // Per slot, this rank's token share: [enorm(e) | hnorm(h)], the block's input and output.
  std::vector<Tensor> joined_, x_, y_;
  // Scratch: a norm's output on its way into joined_; in backward the gradients of y (then x),
  // of joined_ and of a norm's output.
  Tensor normed_, d_y_, d_joined_, d_normed_;
};

}  // namespace kiln
