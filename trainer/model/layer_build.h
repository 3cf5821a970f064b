// What a layer needs to lay out its parameters and buffers, and the shape of the
// micro-batch it runs on.
#pragma once

#include "trainer/config/config.h"
#include "trainer/memory/arena.h"
#include "trainer/model/model_split.h"
#include "trainer/model/parameters.h"

namespace kiln {

class ContextParallel;
class Fp8Products;
class QkHeadRows;
class SequenceParallel;
struct LoraScratch;

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
  // Sequence parallelism's gathers and scatters; null when it is off.
  const SequenceParallel* sequence = nullptr;
  // Context parallelism's ring attention; null when it is off.
  const ContextParallel* context = nullptr;
  // The FP8 products the linear layers register with (precision.dtype=fp8); null otherwise.
  Fp8Products* fp8 = nullptr;
  // The LoRA adapters' shared buffers (finetune.lora, lora_adapter.h); null without LoRA.
  const LoraScratch* lora = nullptr;
  // The row moves of the normalised query and key heads (model.qk_norm); null otherwise.
  const QkHeadRows* qk_heads = nullptr;
  // With the backward split in two (ModelSplit::split_backward): what the layers' weight
  // gradients are computed from later (inputs, output gradients, a norm's statistics), one
  // copy per slot; null otherwise.
  Arena* weight_inputs = nullptr;

  // The tokens of a sequence this rank holds: seq_len, or its 1 / cp share.
  int64_t seq() const { return model.seq_len / split.cp(); }
  // A [micro_batch, seq, width] buffer.
  Tensor take(Arena& arena, int64_t width) const { return arena.take({micro_batch, seq(), width}, dtype); }
  // A [micro_batch, seq] buffer of statistics.
  Tensor take_stats(Arena& arena) const { return arena.take({micro_batch, seq()}, stat_dtype); }
  // The same for this rank's share of the tokens between the tensor-parallel layers
  // (all its tokens without sequence parallelism): [micro_batch, seq / parts, ...].
  Tensor take_share(Arena& arena, int64_t width) const {
    return arena.take({micro_batch, seq() / split.sequence_parts(), width}, dtype);
  }
  Tensor take_share_stats(Arena& arena) const {
    return arena.take({micro_batch, seq() / split.sequence_parts()}, stat_dtype);
  }
};

// What LoRA's dropout draws its masks from for a micro-batch (kernels/dropout_mask.h): a
// training batch's seed and the run's number of its first sample. Without a sample
// (validation, generation, a forward alone) nothing is dropped.
struct DropoutDraw {
  uint64_t seed = 0;
  int64_t first_sample = -1;

  bool on() const { return first_sample >= 0; }
};

// The micro-batch in flight: b sequences of t tokens (at most the sizes laid out for),
// stored in activation slot `slot`.
struct Batch {
  int64_t b = 0;
  int64_t t = 0;
  int slot = 0;
  // The shares its tokens are cut into between the tensor-parallel layers (sequence_parallel.h).
  int64_t parts = 1;
  // Its document resets (gpt_model.h), [b, t] I32, as the ops take them: empty when absent.
  Tensor positions{};
  Tensor key_starts{};
  DropoutDraw dropout{};
  // A split backward's input-gradient pass: the layers keep what their weights' gradients
  // need in the slot's copies and leave them to the weight pass (backward_weights).
  bool defer_weights = false;

  // The leading [b, t, ...] part of a [micro_batch, seq, ...] buffer.
  Tensor of(const Tensor& full) const {
    Tensor v = full;
    v.shape.dims[0] = b;
    v.shape.dims[1] = t;
    return v;
  }
  // This rank's share, [b, t / parts, ...], of a buffer from take_share.
  Tensor share_of(const Tensor& share) const {
    Tensor v = share;
    v.shape.dims[0] = b;
    v.shape.dims[1] = t / parts;
    return v;
  }
};

}  // namespace kiln
