// The decoder-only transformer, GPT-2 or Llama-style by model.arch, built from one set
// of layers:
//   embedding (+ learned positions for GPT-2) -> n_layer blocks -> final norm ->
//   output layer (tied to the embedding or not) -> softmax cross-entropy.
// Every buffer is laid out before the first step; forward and backward allocate nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "trainer/model/context_parallel.h"
#include "trainer/model/model_split.h"
#include "trainer/model/multi_token_prediction.h"
#include "trainer/model/qk_norm.h"
#include "trainer/model/scratch.h"
#include "trainer/model/tensor_parallel_linear.h"
#include "trainer/model/transformer_block.h"
#include "trainer/model/unit_hooks.h"
#include "trainer/precision/fp8_products.h"

namespace kiln {

// Megatron's resets at document boundaries, for a batch whose rows pack several documents.
// Either pointer may be null: positions null = 0..t-1 in every row; attention_starts null =
// plain causal attention.
struct DocumentResets {
  const int32_t* positions = nullptr;         // [b * t] each token's position id (GPT-2's
                                              // learned positions and Llama's RoPE use it)
  const int32_t* attention_starts = nullptr;  // [b * t] the first column of its own row that
                                              // each token may attend to (<= its own column)
};

struct ArenaSize {
  std::string name;
  size_t bytes = 0;
};

class GptModel {
 public:
  // dtype: F32, or BF16/F16 on CUDA; F64 (CPU only) serves the gradient checks.
  // Refuses, before allocating anything, a layout that does not fit the backend's memory
  // together with optimizer_bytes_per_element bytes of optimizer state per parameter.
  // split: activation recomputation and the flat buffers' shards.
  GptModel(const ModelConfig& config, int64_t micro_batch, Ops& ops, DType dtype = DType::F32,
           size_t optimizer_bytes_per_element = 0, int slots = 1, const ModelSplit& split = {});

  // A model laid out and never allocated, for planning: the constructor's own two layout
  // passes, the parameters' regions padded between them as allocate() pads them, so that
  // arenas() and every parameter's place are the allocated model's; ops is never called.
  static std::unique_ptr<GptModel> laid_out(const ModelConfig& config, int64_t micro_batch, Ops& ops, DType dtype,
                                            int slots, const ModelSplit& split);

  // Seeded initialisation: every parameter draws from its own stream (seed, name).
  void init_parameters(uint64_t seed);

  // Copies b sequences of t tokens into slot `slot`; targets may be null (no loss), and a
  // target < 0 is masked out of the loss. resets: the position ids and attention starts of
  // rows that pack several documents (checked here: positions below model.seq_len, starts
  // within [0, column]); without them the step does no extra work. dropout: a training
  // batch's draw of LoRA's dropout masks (layer_build.h); none by default.
  void set_batch(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t,
                 int slot = 0, const DocumentResets& resets = {}, DropoutDraw dropout = {});
  // set_batch's checks of a batch, alone; returns its count of unmasked targets.
  int64_t check_batch(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t,
                      const DocumentResets& resets = {}) const;
  // For a step captured once and replayed (CUDA graphs; trainer/train/device_step.h), on a
  // model whole on one rank: set_batch into slot 0 from page-locked host memory
  // (Ops::allocate_host) by copies that wait for nothing, so each replay copies what the
  // memory holds then. The caller checks each batch it puts there (check_batch) and keeps
  // its count of targets: target_count() is not set.
  void queue_batch(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t,
                   const DocumentResets& resets = {});
  // Forward over the slot's batch through virtual stage `chunk` (pipeline parallelism; the
  // whole model is chunk 0); returns the mean loss over its unmasked targets from the chunk
  // with the head (0 without targets, and from other chunks). A chunk without the embedding
  // reads its input from chunk_input, where the previous stage's output was received.
  double forward(int slot = 0, int chunk = 0);
  // forward of slot 0 through a model whole on one rank, without reading the loss back: it
  // waits for nothing, and the per-token losses stay in token_losses().
  void queue_forward();
  // The slot's per-token losses from its last forward ([b, t] F32, 0 where masked).
  Tensor token_losses(int slot = 0) const;
  // What forward returns, from per-token losses read back (summed in order) and the batch's
  // count of unmasked targets.
  static double loss_sum(std::span<const double> losses);
  static double mean_loss(double sum, int64_t target_count);
  // Backward from the slot's per-token losses, each weighted by dloss; gradients add up.
  // After each layer, gradients_ready (when given) hears how many leading elements of the
  // flat gradient buffer this backward has finished with: data parallelism starts reducing
  // them while the earlier layers run. A chunk without the head starts from the gradient of
  // its output, received into residual_gradient; a chunk without the embedding leaves the
  // gradient of its input there.
  void backward(double dloss, int slot = 0,
                const std::function<void(int64_t)>& gradients_ready = {}, int chunk = 0);
  // The same backward in two (ModelSplit::split_backward; the zero-bubble schedules): the
  // input's gradient, leaving the gradient of the chunk's input as backward does, with the
  // norms' and the routers' parameter gradients; then, later, the linear layers', the
  // experts' and the embedding's from the copies the first kept in the slot, telling
  // gradients_ready as backward does. Together they add what backward adds.
  void backward_input(double dloss, int slot = 0, int chunk = 0);
  void backward_weights(int slot = 0, int chunk = 0, const std::function<void(int64_t)>& gradients_ready = {});
  // Zeroes the gradients (sharded in units, the whole-step units' windows: the blocks'
  // are zeroed as each backward starts).
  void zero_grad();
  // Sharded in units: who hears of each block's forward and backward (null: nobody).
  void set_unit_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  // After each step under precision.dtype=fp8: the FP8 scales for the next step
  // (Fp8Products::update).
  void update_fp8_scales() {
    if (fp8_) fp8_->update(ops_);
  }

  // This rank's virtual stages (one, the whole model, without pipeline parallelism).
  int chunks() const { return static_cast<int>(chunks_.size()); }
  const PipelineChunk& chunk(int c) const { return chunks_[static_cast<size_t>(c)]; }
  // What passes between pipeline stages, as the slot's batch shapes it ([b, t / parts, C]):
  // a chunk's input and output activations, and the gradient of the residual stream.
  Tensor chunk_input(int slot, int chunk) const;
  Tensor chunk_output(int slot, int chunk) const;
  Tensor residual_gradient(int slot) const;
  // Pipeline stages: the micro-batch in slot `slot` is the step's `micro`-th. Each chunk keeps
  // its activations in its own slot, micro mod its count (ModelSplit::chunk_slots); until this
  // is called, slot s holds micro-batch s.
  void begin_micro_batch(int slot, int micro);
  // The V's turn (parallel.schedule=zbv|dualpipev), where chunk `chunk` follows this rank's
  // chunk before it in the model: its input is that chunk's output, and the gradient of its
  // input, left in residual_gradient by its backward, waits in handed_gradient (one a slot)
  // until the chunk before's backward takes it as its output's.
  bool follows_own_chunk(int chunk) const;
  Tensor handed_gradient(int slot) const;

  // The first vocab_size logits of row `row` (= sequence * t + position) of the last
  // forward, as float. Valid until backward, which turns the logits into their gradient.
  // A model split over a tensor group holds its vocabulary slice only, and a pipeline stage
  // a part of the layers: refused.
  void logits_row(int64_t row, std::vector<float>& out, int slot = 0) const;

  ParameterSet& parameters() { return params_; }
  const ParameterSet& parameters() const { return params_; }
  const ModelConfig& config() const { return config_; }
  Ops& ops() const { return ops_; }
  // Llama's RoPE angles, [seq_len, head_dim / 2, 2] (cos, sin) by absolute position; empty
  // for GPT-2. The decoder (gpt_decoder.h) rotates with the same table.
  const Tensor& rope_table() const { return rope_table_; }
  int64_t micro_batch() const { return micro_batch_; }
  int slots() const { return slots_; }
  // Every arena and the op workspace, as allocated.
  std::vector<ArenaSize> memory() const;
  // The arenas (parameters, gradients, activations, scratch, the windows of parameters
  // sharded in units, recomputed when the split recomputes, fp8's scales and codes under
  // FP8, and the frozen parameters under LoRA), the op workspace left out.
  std::vector<ArenaSize> arenas() const;
  // The mixture of experts of layer `layer` (0-based, of the whole model) when it is an MoE
  // layer held by this rank; null otherwise.
  MoeMlp* experts(int layer);
  const MoeMlp* experts(int layer) const;
  // Unmasked targets in the slot's batch.
  int64_t target_count(int slot = 0) const { return target_count_[static_cast<size_t>(slot)]; }
  // Multi-token prediction (model.mtp_depth), on the chunk with the output layer: the slot's
  // summed losses at each depth from its last forward with targets (this rank's tokens), and
  // its batch's count of unmasked targets at each depth (the batch's rows, k places short).
  const std::vector<double>& mtp_loss_sums(int slot = 0) const { return mtp_loss_sum_[static_cast<size_t>(slot)]; }
  const std::vector<int64_t>& mtp_target_counts(int slot = 0) const {
    return mtp_target_count_[static_cast<size_t>(slot)];
  }

 private:
  struct LayoutOnly {};
  // The first layout pass alone: sizes, no memory.
  GptModel(LayoutOnly, const ModelConfig& config, int64_t micro_batch, Ops& ops, DType dtype, int slots,
           const ModelSplit& split);
  void layout();
  void check_fits(size_t optimizer_bytes_per_element) const;
  void fill_rope_table();
  void init_parameter(const Parameter& p, uint64_t seed);
  bool tp_split() const { return split_.tp() > 1; }
  bool has_embedding() const { return chunks_.front().embedding; }
  bool has_head() const { return chunks_.back().head; }
  // Sequence parallelism asked for over a tensor group of more than one rank.
  bool sequence_parallel() const { return split_.sequence_parts() > 1; }
  bool context_parallel() const { return split_.cp() > 1; }
  // Under context parallelism, this rank's chunks of the b whole sequences in `whole` into
  // `mine` (empty when whole is null).
  void keep_context_chunks(std::vector<int32_t>& mine, const int32_t* whole, int64_t b) const;
  // Copies a batch of b rows of t tokens, checked, into slot `slot`; queued: by copies from
  // page-locked memory that wait for nothing.
  void load_batch(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t, int slot,
                  const DocumentResets& resets, bool queued);
  // forward up to the logits; true when the cross-entropy follows (the chunk has the head
  // and the batch has targets).
  bool forward_to_logits(int slot, int chunk);
  // backward, or with defer_weights backward_input.
  void backward_pass(double dloss, int slot, const std::function<void(int64_t)>& gradients_ready, int chunk,
                     bool defer_weights);
  // Each call tells gradients_ready (when given) how much of the flat gradient buffer the
  // chunk's backward has finished, one ready_after_ count after another.
  std::function<void()> report_ready(int chunk, const std::function<void(int64_t)>& gradients_ready) const;
  // The embedding's gradients (the positions' too, GPT-2's) from the gradient of its output.
  void embedding_backward(int slot, const Batch& batch, const Tensor& d_embedded);
  // Chunk `chunk`'s count of activation slots, and the slot's batch as that chunk runs it: in
  // its own slot of the micro-batch (begin_micro_batch).
  int chunk_slots(int chunk) const;
  Batch chunk_batch(int slot, int chunk) const;
  // The chunk's activations of the slot's micro-batch.
  struct ChunkSlot;
  const ChunkSlot& chunk_slot(int slot, int chunk) const;
  int head_chunk() const { return chunks() - 1; }
  // Sharded in units: the unit a chunk's forward reads at its block `block`, the head just
  // past its last block (-1: none there).
  int unit_after(int chunk, size_t block) const;
  // The slot's per-token losses from its logits, queued.
  void queue_cross_entropy(int slot);
  // The slot's ids as this rank's vocabulary slice numbers them.
  void set_local_ids(const int32_t* tokens, const int32_t* targets, int64_t n, int slot);
  // One id so numbered: a token outside the slice selects no row; a target outside it is
  // local_vocab_ (the vocabulary-parallel cross-entropy's "elsewhere"), a masked one -1.
  int32_t local_token(int32_t id) const;
  int32_t local_target(int32_t id) const;
  // The embedding of `ids` ([b, t], this rank's vocabulary slice's numbering) into `embedded`,
  // this rank's token share: summed over the tensor group (reduce-scattered under sequence
  // parallelism). positions: GPT-2's learned positions, added by one rank (else empty).
  void embed(const Batch& batch, const Tensor& embedded, const Tensor& ids, const Tensor& weight,
             const Tensor& positions);
  // The summed per-token losses of [b, t, local vocab] logits against this rank's targets (as
  // its vocabulary slice numbers them; host: the same on the host, under tensor parallelism).
  double cross_entropy_sum(const Batch& batch, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets, const std::vector<int32_t>& host);
  // Multi-token prediction (gpt_model_mtp.cpp). The slot's tokens and targets k places ahead
  // for each depth k, a target masked where its token lies past the row or in another
  // document (resets' attention starts differ).
  void set_mtp_ids(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t, int slot,
                   const DocumentResets& resets);
  // After the main forward of the chunk with the head: every depth's module, logits and loss.
  void mtp_forward(int slot, int chunk);
  // Before the main head's backward: every depth's, deepest first, leaving the gradient of the
  // final norm's output (h[0]) in mtp_d_h_ (returned, the micro-batch's view).
  Tensor mtp_backward(int slot, int chunk, double dloss);

  ModelConfig config_;
  int64_t micro_batch_;
  int slots_;
  ModelSplit split_;
  DType dtype_;
  Ops& ops_;
  ParameterSet params_;
  Arena activations_{"activations"};
  Arena scratch_{"scratch"};
  Arena recomputed_{"recomputed"};
  Arena weight_inputs_{"weight gradient inputs"};  // split_backward
  size_t workspace_bytes_ = 0;
  std::unique_ptr<Fp8Products> fp8_;  // precision.dtype=fp8

  std::vector<PipelineChunk> chunks_;
  Parameter wte_, wpe_;
  // Per chunk: the flat gradient buffer's elements final after its output layer and final
  // norm (when it has them), then after each of its blocks in backward order. The buffer
  // holds the chunks last to first, so each chunk's counts go on from the later ones'; the
  // embeddings come last (the whole buffer).
  std::vector<std::vector<int64_t>> ready_after_;
  std::vector<TransformerBlock> blocks_;  // this rank's layers, chunk by chunk
  std::vector<int> block_unit_;           // each one's unit when sharded in units
  int head_unit_ = -1, embedding_unit_ = -1;
  UnitHooks* hooks_ = nullptr;
  std::vector<size_t> first_block_;       // of each chunk in blocks_
  Norm final_norm_;
  ColumnParallelLinear lm_head_;  // the vocabulary split over the tensor group
  // Multi-token prediction's modules, one a depth, on the chunk with the head; the embedding
  // they read (the first stage's, or the last stage's copy of it).
  std::vector<MtpModule> mtp_;
  Parameter mtp_embedding_;
  // Scratch for their backward, this rank's token share: the gradient of the depth's h and of
  // the one before, of its embedding, and the output layer's part of it.
  Tensor mtp_d_h_, mtp_d_prev_, mtp_d_e_, mtp_d_head_;
  SequenceParallel sequence_;     // bound only under sequence parallelism
  ContextParallel context_;       // bound only under context parallelism
  LoraScratch lora_scratch_;      // bound only under LoRA (finetune.lora)
  QkHeadRows qk_heads_;           // laid out only under model.qk_norm
  // This rank's vocabulary slice: ids [vocab_start_, vocab_start_ + padded / tp), of which
  // local_vocab_ are real (below model.vocab_size).
  int64_t vocab_start_ = 0;
  int64_t local_vocab_ = 0;
  BlockScratch block_scratch_;
  Tensor rope_table_;
  Tensor d_residual_;
  // A micro-batch's own buffers, one set a slot.
  struct Slot {
    Tensor tokens, targets;     // [B, T] int32
    // Split over a tensor group: the ids as this rank's vocabulary slice numbers them (tokens
    // outside it give zero rows; targets outside it are >= local_vocab_, masked ones < 0).
    Tensor local_tokens, local_targets;
    std::vector<int32_t> local_targets_host;
    Tensor positions, key_starts;  // [B, T] int32: DocumentResets, when the batch has them
    Tensor handed_gradient;        // where a chunk follows its own (follows_own_chunk)
    // Multi-token prediction, per depth: the tokens it embeds and its targets ([B, T] int32,
    // numbered as local_tokens and local_targets are), the targets on the host as well.
    std::vector<Tensor> mtp_tokens, mtp_targets;
    std::vector<std::vector<int32_t>> mtp_targets_host;
  };
  // A multi-token prediction depth's activations of a micro-batch.
  struct MtpSlot {
    Tensor embedded, out;  // this rank's token share: the embedding it reads, its h
    Tensor logits;         // [B, T, local vocab]; becomes its own gradient in backward
    Tensor losses, lse;    // [B, T]
  };
  // A chunk's activations of a micro-batch, one set a chunk slot.
  struct ChunkSlot {
    // This rank's token share (sequence_parallel.h), [B, T / parts, C]: each block's input,
    // then the last block's output
    std::vector<Tensor> residual;
    // The chunk with the head:
    Tensor final_norm_out;
    Tensor logits;              // [B, T, padded vocab]; becomes its own gradient in backward
    Tensor losses, lse;         // [B, T]
    // The embedding's chunk, under split_backward: the gradient of its output, kept for the
    // weight pass.
    Tensor embedding_grad;
    std::vector<MtpSlot> mtp;  // the chunk with the head, one a depth
  };
  std::vector<Slot> slot_;
  std::vector<std::vector<ChunkSlot>> chunk_slot_;  // [chunk][its slot]
  std::vector<int> micro_of_slot_;                  // begin_micro_batch
  // Context parallelism: the last batch's chunks this rank keeps, on the host.
  struct ContextChunks {
    std::vector<int32_t> tokens, targets, positions, key_starts;
  };
  ContextChunks context_chunks_;
  std::vector<Batch> batch_;
  std::vector<int64_t> target_count_;
  std::vector<std::vector<double>> mtp_loss_sum_;       // [slot][depth]
  std::vector<std::vector<int64_t>> mtp_target_count_;  // [slot][depth]
  std::vector<bool> has_targets_;
};

}  // namespace kiln
