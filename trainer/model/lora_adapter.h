// A LoRA adapter (Hu et al., 2021; PEFT's LoraLayer) beside one linear layer, or beside one
// part of a fused one (the query of the fused qkv, SwiGLU's gate): the part's output gains
//   scale · x A^T B^T,  A [r, in], B [out, r], scale = alpha / r,
// while the layer's own weights stay frozen (parameters.h). A starts normal with std 1 / r
// (PEFT's init_lora_weights="gaussian"), B at zero, so training starts from the base.
//
// Under tensor parallelism the factors split as their base layer does (Megatron's layers,
// tensor_parallel_linear.h), and the arithmetic stays exact:
//  - beside a column-parallel layer, A is whole on every rank and B holds this rank's rows of
//    the part. u = x A^T is the same on every rank; in backward each rank's du = dy_part B
//    sums only its own output columns: its dx += du A is summed by the layer's own
//    all-reduce (or reduce-scatter) of dx, and du is all-reduced ([N, r]) before
//    dA += du^T x, so every rank holds A's whole gradient.
//  - beside a row-parallel layer, A holds this rank's input columns and B is whole: the
//    partial sums of u = x A^T are all-reduced in forward ([N, r]), after which u, and so
//    B's gradient dy^T u, is the same on every rank (under sequence parallelism the rank
//    adds the rows of its token share to its output). Backward needs no communication.
//
// With finetune.lora.dropout = p > 0, a training batch's adapters read dropout(x) (PEFT's
// lora_dropout, inverted: kept elements times 1 / (1 - p)) where the layer reads x:
// u = dropout(x) A^T, dA += du^T dropout(x), dx += dropout(du A) (the same mask). The mask is
// counter-based (kernels/dropout_mask.h): backward draws forward's again into the scratch
// instead of keeping it, and every rank that holds a token's features draws the same keeps
// for them.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/layer_build.h"

namespace kiln {

// The buffers every adapter uses in turn and nobody keeps, bound once per model: two
// [B, T, r], one as wide as the widest adapted part of a fused layer on this rank and, under
// dropout, one as wide as the widest adapter input on this rank (dropout(x), and dropout's
// input gradient before its mask).
struct LoraScratch {
  Tensor rank_a, rank_b, part, dropped;

  void bind(const LayerBuild& build);
};

class LoraAdapter {
 public:
  // Beside columns [first, first + whole_width / tp) of a column-parallel layer's output on
  // this rank, in: the layer's whole input width. name: the parameters' prefix
  // (name.lora_a, name.lora_b).
  void bind_column(const LayerBuild& build, const std::string& name, int64_t in, int64_t whole_width,
                   int64_t first);
  // Beside a row-parallel layer of whole input width in and output width out.
  void bind_row(const LayerBuild& build, const std::string& name, int64_t in, int64_t out);

  // y += the adapter's output, x: the input as the layer's product reads it (whole under
  // sequence parallelism for a column-parallel layer; this rank's columns for a row-parallel
  // one, with y this rank's token share under sequence parallelism).
  void forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const;
  // dx += the adapter's part of the input gradient (for a column-parallel layer this rank's
  // partial sum, which the layer sums over the group; skipped when empty); A's and B's
  // gradients accumulate. dy: the layer's output gradient, whole over the tokens.
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x) const;

 private:
  // The scale, the dropout, the groups, the shared buffers and a u per slot. name: the
  // adapter's, whose hash is its dropout's stream.
  void bind_buffers(const LayerBuild& build, const std::string& name);
  // Whether the batch's adapters drop: training under finetune.lora.dropout > 0.
  bool drops(const Batch& batch) const { return dropout_.p > 0 && batch.dropout.on(); }
  // The batch's mask over x's rows and columns.
  DropoutMask mask(const Batch& batch) const;
  // x as a matrix as the adapter reads it: dropped out into the scratch where drops(batch).
  Tensor input(Ops& ops, const Batch& batch, const Tensor& x) const;

  bool column_ = true;
  double scale_ = 1;
  int64_t first_ = 0;  // of the columns of the layer's output on this rank
  Parameter a_, b_;
  Communicator* group_ = nullptr;  // the tensor group (null: tp = 1)
  const SequenceParallel* sequence_ = nullptr;
  const LoraScratch* scratch_ = nullptr;
  std::vector<Tensor> u_;  // per slot: scale · x A^T, [B, T, r]
  // The mask's fixed part: p, the stream, the sequence's places and x's features.
  DropoutMask dropout_;
  bool context_runs_ = false;  // its runs are context parallelism's chunks
};

// The adapters of one tensor-parallel layer's parts.
using LoraAdapters = std::vector<LoraAdapter>;

}  // namespace kiln
