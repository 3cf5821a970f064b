// What a layer needs to lay out its parameters and buffers, and the shape of the
// micro-batch it runs on.
#pragma once

#include "trainer/config/config.h"
#include "trainer/memory/arena.h"
#include "trainer/model/model_split.h"
#include "trainer/model/parameters.h"

namespace kiln {

struct LayerBuild {
  const ModelConfig& model;
  int64_t micro_batch;
  int slots;  // activation slots: micro-batches a stage can hold in flight
  DType dtype;       // activations and parameters
  DType stat_dtype;  // norm statistics, log-sum-exps, losses, RoPE table
  ParameterSet& params;
  Arena& activations;  // saved for backward, one copy per slot
  Arena& scratch;      // shared by all layers, overwritten freely
  const ModelSplit& split;
  // What backward recomputes: one copy shared by the blocks, refilled by each block's
  // forward re-run just before its backward.
  Arena& recomputed;

  // A [micro_batch, seq_len, width] buffer.
  Tensor take(Arena& arena, int64_t width) const {
    return arena.take({micro_batch, model.seq_len, width}, dtype);
  }
  // A [micro_batch, seq_len] buffer of statistics.
  Tensor take_stats(Arena& arena) const {
    return arena.take({micro_batch, model.seq_len}, stat_dtype);
  }
};

// The micro-batch in flight: b sequences of t tokens (at most the sizes laid out for),
// stored in activation slot `slot`.
struct Batch {
  int64_t b = 0;
  int64_t t = 0;
  int slot = 0;
  // Its document resets (gpt_model.h), [b, t] I32, as the ops take them: empty when absent.
  Tensor positions{};
  Tensor key_starts{};

  // The leading [b, t, ...] part of a [micro_batch, seq_len, ...] buffer.
  Tensor of(const Tensor& full) const {
    Tensor v = full;
    v.shape.dims[0] = b;
    v.shape.dims[1] = t;
    return v;
  }
};

}  // namespace kiln
