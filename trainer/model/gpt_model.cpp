#include "trainer/model/gpt_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"
#include "base/human_format.h"
#include "trainer/memory/host_copy.h"
#include "trainer/model/rope_frequencies.h"
#include "trainer/model/vocab_parallel_cross_entropy.h"
#include "trainer/util/random.h"

namespace kiln {

namespace {
// Statistics and gradients are F32 unless the whole model computes in F64.
DType wide_dtype(DType compute) { return compute == DType::F64 ? DType::F64 : DType::F32; }
}  // namespace

GptModel::GptModel(LayoutOnly, const ModelConfig& config, int64_t micro_batch, Ops& ops, DType dtype, int slots,
                   const ModelSplit& split)
    : config_(config), micro_batch_(micro_batch), slots_(slots), split_(split), dtype_(dtype), ops_(ops),
      params_(dtype, wide_dtype(dtype), config.lora.enabled()) {
  chunks_ = split_.chunks;
  if (chunks_.empty()) chunks_ = {{0, config_.n_layer, true, true}};
  KILN_CHECK(!split_.split_backward || config_.mtp_depth == 0,
             "a split backward does not run multi-token prediction's modules yet");
  if (split_.fp8) fp8_ = std::make_unique<Fp8Products>(*split_.fp8);
  if (split_.shard_units)
    params_.shard_units(split_.flat_shards, split_.flat_shard_rank, split_.shard_values, split_.expert_shards,
                        split_.expert_shard_rank);
  layout();
}

std::unique_ptr<GptModel> GptModel::laid_out(const ModelConfig& config, int64_t micro_batch, Ops& ops, DType dtype,
                                             int slots, const ModelSplit& split) {
  std::unique_ptr<GptModel> model(new GptModel(LayoutOnly{}, config, micro_batch, ops, dtype, slots, split));
  model->params_.size_regions(split.flat_shards, split.expert_shards);
  for (Arena* arena : {&model->activations_, &model->scratch_, &model->recomputed_, &model->weight_inputs_})
    arena->rewind();
  model->layout();
  return model;
}

GptModel::GptModel(const ModelConfig& config, int64_t micro_batch, Ops& ops, DType dtype,
                   size_t optimizer_bytes_per_element, int slots, const ModelSplit& split)
    : GptModel(LayoutOnly{}, config, micro_batch, ops, dtype, slots, split) {
  // The first pass (above) learned the sizes, the second hands out memory.
  check_fits(optimizer_bytes_per_element);
  params_.allocate(ops_, split_.flat_shards, split_.expert_shards);
  activations_.allocate(ops_);
  scratch_.allocate(ops_);
  recomputed_.allocate(ops_);
  weight_inputs_.allocate(ops_);
  if (fp8_) fp8_->allocate(ops_);
  layout();
  activations_.check_complete();
  scratch_.check_complete();
  recomputed_.check_complete();
  weight_inputs_.check_complete();
  if (fp8_) fp8_->start(ops_);
  const int tp = split_.tp();
  workspace_bytes_ = ops_.reserve({micro_batch_, config_.seq_len / split_.cp(),
                                   {config_.n_head / tp, config_.kv_heads() / tp, config_.head_dim()},
                                   dtype_});
  if (config_.is_llama()) fill_rope_table();
  if (context_parallel()) context_.fill_indices(ops_);
  if (config_.qk_norm) qk_heads_.fill(ops_);
  for (int l = 0; l < config_.block_count(); ++l)
    if (MoeMlp* moe = experts(l)) moe->start(ops_);
  batch_.assign(static_cast<size_t>(slots_), Batch{});
  micro_of_slot_.assign(static_cast<size_t>(slots_), 0);
  for (int s = 0; s < slots_; ++s) micro_of_slot_[static_cast<size_t>(s)] = s;
  target_count_.assign(static_cast<size_t>(slots_), 0);
  mtp_loss_sum_.assign(static_cast<size_t>(slots_), std::vector<double>(mtp_.size(), 0.0));
  mtp_target_count_.assign(static_cast<size_t>(slots_), std::vector<int64_t>(mtp_.size(), 0));
  has_targets_.assign(static_cast<size_t>(slots_), false);
}

void GptModel::check_fits(size_t optimizer_bytes_per_element) const {
  const size_t optimizer = static_cast<size_t>(params_.size()) * optimizer_bytes_per_element;
  size_t needed = optimizer;
  std::string parts;
  for (const ArenaSize& a : memory()) {
    needed += a.bytes;
    parts += a.name + " " + human_bytes(a.bytes) + ", ";
  }
  const size_t available = ops_.available_memory();
  KILN_CHECK(needed <= available,
             "the run needs " + human_bytes(needed) + " (" + parts + "optimizer " +
                 human_bytes(optimizer) + ") but " + ops_.name() + " has " +
                 human_bytes(available) +
                 " available; lower train.micro_batch, model.seq_len or the model size");
}

void GptModel::layout() {
  params_.begin_pass();
  if (fp8_) fp8_->begin_pass();
  const SequenceParallel* sequence = sequence_parallel() ? &sequence_ : nullptr;
  const ContextParallel* context = context_parallel() ? &context_ : nullptr;
  Arena* weight_inputs = split_.split_backward ? &weight_inputs_ : nullptr;
  const LayerBuild build{config_, micro_batch_, slots_,  dtype_,  wide_dtype(dtype_), params_,
                         activations_, scratch_, split_, recomputed_, sequence, context,
                         nullptr, nullptr, nullptr, weight_inputs};
  // Under full recomputation a block keeps nothing of its own: what its backward reads is
  // laid out in the shared arena, the same memory for every block.
  const bool full = split_.recompute == Recompute::Full;
  const QkHeadRows* qk_heads = config_.qk_norm ? &qk_heads_ : nullptr;
  const LayerBuild block_build{config_, micro_batch_, slots_, dtype_, wide_dtype(dtype_),
                               params_, full ? recomputed_ : activations_, scratch_, split_,
                               recomputed_, sequence, context, fp8_.get(),
                               config_.lora.enabled() ? &lora_scratch_ : nullptr, qk_heads, weight_inputs};
  const int64_t C = config_.d_model, V = config_.vocab_size;
  // Positions are the whole sequence's; each rank holds T / cp tokens of it (Tl).
  const int64_t T = config_.seq_len, Tl = build.seq();
  // The vocabulary-parallel embedding and output layer hold rows
  // [vocab_start_, vocab_start_ + Vl) of the padded vocabulary.
  const int64_t Vp = config_.padded_vocab(), Vl = Vp / split_.tp();
  vocab_start_ = Vl * split_.tp_rank();
  local_vocab_ = std::clamp<int64_t>(V - vocab_start_, 0, Vl);
  const TensorSplit vocab_rows = split_.split(0, {Vp});

  if (config_.is_llama())
    rope_table_ = activations_.take({T, config_.rope_dim() / 2, 2}, build.stat_dtype);
  if (sequence) sequence_.bind(build);
  if (context) context_.bind(build);
  if (config_.lora.enabled()) lora_scratch_.bind(build);
  if (qk_heads)
    qk_heads_.take(activations_, scratch_, micro_batch_ * Tl,
                   {config_.n_head / split_.tp(), config_.kv_heads() / split_.tp(), config_.head_dim()}, dtype_);

  // Parameters in the order backward produces their gradients: the chunks last to first.
  // The last pipeline stage of a model whose head reads the embedding (tied to it, or
  // embedding multi-token prediction's tokens) holds its own copy of the embedding, kept equal
  // to the first stage's (Megatron's).
  const bool head_copy = config_.head_reads_embedding() && has_head() && !has_embedding();
  // Sharded in units: a head that reads the embedding does so at the far ends of the step, so
  // the head and the embeddings are kept whole for it; otherwise each is gathered where it is read.
  const UnitHold ends = config_.head_reads_embedding() || split_.shard_per_step ? UnitHold::Step : UnitHold::Ends;
  Parameter head, embedding_copy;
  ready_after_.assign(chunks_.size(), {});
  first_block_.assign(chunks_.size(), 0);
  size_t local_layers = 0;
  for (const PipelineChunk& c : chunks_) local_layers += static_cast<size_t>(c.layers());
  blocks_.assign(local_layers, TransformerBlock{});
  block_unit_.assign(local_layers, -1);
  for (size_t c = chunks_.size(); c-- > 0;) {
    const PipelineChunk& chunk = chunks_[c];
    local_layers -= static_cast<size_t>(chunk.layers());
    first_block_[c] = local_layers;
    // The chunk's layers keep their activations in its own slots.
    LayerBuild chunk_build = block_build;
    chunk_build.slots = chunk_slots(static_cast<int>(c));
    if (chunk.head) {
      head_unit_ = params_.begin_unit(ends);
      if (!config_.tie_embeddings)
        head = params_.add("lm_head.weight", {Vl, C}, Init::Normal, config_.init_std, V, vocab_rows);
      if (head_copy) {
        embedding_copy = params_.add("wte", {Vl, C}, Init::Normal, config_.init_std, V, vocab_rows, true);
        if (config_.tie_embeddings) head = embedding_copy;
      }
      LayerBuild head_build = build;
      head_build.slots = chunk_build.slots;
      final_norm_.bind(head_build, "final_norm");
      mtp_.assign(static_cast<size_t>(config_.mtp_depth), MtpModule{});
      for (int depth = config_.mtp_depth; depth >= 1; --depth) {
        recomputed_.rewind();
        mtp_[static_cast<size_t>(depth - 1)].bind(head_build, chunk_build, depth, rope_table_);
      }
      ready_after_[c].push_back(params_.dense_laid_out());
    }
    for (int l = chunk.layers() - 1; l >= 0; --l) {
      block_unit_[first_block_[c] + static_cast<size_t>(l)] = params_.begin_unit(split_.shard_per_step ? UnitHold::Step : UnitHold::Turn);
      recomputed_.rewind();
      const int layer = chunk.first_layer + l;
      blocks_[first_block_[c] + static_cast<size_t>(l)].bind(chunk_build, layer, rope_table_,
                                                             "layers." + std::to_string(layer));
      ready_after_[c].push_back(params_.dense_laid_out());
    }
  }
  if (has_embedding()) {
    embedding_unit_ = params_.begin_unit(ends);
    if (!config_.is_llama()) wpe_ = params_.add("wpe", {T, C}, Init::Normal, config_.init_std);
    wte_ = params_.add("wte", {Vl, C}, Init::Normal, config_.init_std, V, vocab_rows);
  }
  if (has_head()) {
    LayerBuild head_build = build;
    head_build.slots = chunk_slots(head_chunk());
    lm_head_.bind_shared(head_build, config_.tie_embeddings && !head_copy ? wte_ : head, split_.tensor, sequence);
    mtp_embedding_ = head_copy ? embedding_copy : wte_;
  }

  slot_.assign(static_cast<size_t>(slots_), Slot{});
  for (Slot& s : slot_) {
    s.tokens = activations_.take({micro_batch_, Tl}, DType::I32);
    s.targets = activations_.take({micro_batch_, Tl}, DType::I32);
    if (tp_split()) {
      s.local_tokens = activations_.take({micro_batch_, Tl}, DType::I32);
      s.local_targets = activations_.take({micro_batch_, Tl}, DType::I32);
    } else {
      s.local_tokens = s.tokens;
      s.local_targets = s.targets;
    }
    s.positions = activations_.take({micro_batch_, Tl}, DType::I32);
    s.key_starts = activations_.take({micro_batch_, Tl}, DType::I32);
    for (int c = 0; c < chunks(); ++c)
      if (follows_own_chunk(c)) s.handed_gradient = build.take_share(activations_, C);
    s.mtp_tokens.clear();
    s.mtp_targets.clear();
    s.mtp_targets_host.assign(mtp_.size(), {});
    for (size_t k = 0; k < mtp_.size(); ++k) {
      s.mtp_tokens.push_back(activations_.take({micro_batch_, Tl}, DType::I32));
      s.mtp_targets.push_back(activations_.take({micro_batch_, Tl}, DType::I32));
    }
  }
  chunk_slot_.assign(chunks_.size(), {});
  for (int c = 0; c < chunks(); ++c) {
    const PipelineChunk& chunk = chunks_[static_cast<size_t>(c)];
    chunk_slot_[static_cast<size_t>(c)].assign(static_cast<size_t>(chunk_slots(c)), ChunkSlot{});
    for (ChunkSlot& a : chunk_slot_[static_cast<size_t>(c)]) {
      for (int l = 0; l <= chunk.layers(); ++l) a.residual.push_back(build.take_share(activations_, C));
      if (chunk.head) {
        a.final_norm_out = build.take_share(activations_, C);
        a.logits = build.take(activations_, Vl);
        a.losses = build.take_stats(activations_);
        a.lse = build.take_stats(activations_);
        for (size_t k = 0; k < mtp_.size(); ++k)
          a.mtp.push_back({build.take_share(activations_, C), build.take_share(activations_, C),
                           build.take(activations_, Vl), build.take_stats(activations_),
                           build.take_stats(activations_)});
      }
      // The embedding's gradient a split backward keeps for its weight pass: every token's.
      if (chunk.embedding && weight_inputs) a.embedding_grad = build.take(*weight_inputs, C);
    }
  }
  block_scratch_.bind(build);
  d_residual_ = build.take_share(scratch_, C);
  if (!mtp_.empty())
    for (Tensor* t : {&mtp_d_h_, &mtp_d_prev_, &mtp_d_e_, &mtp_d_head_}) *t = build.take_share(scratch_, C);
  if (fp8_) fp8_->end_pass();
}

void GptModel::fill_rope_table() {
  const int64_t T = config_.seq_len, half = config_.rope_dim() / 2;
  const std::vector<double> inv_freq = rope_inverse_frequencies(config_);
  const double factor = rope_attention_factor(config_);
  std::vector<double> table(static_cast<size_t>(T * half * 2));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inv_freq[static_cast<size_t>(i)];
      table[static_cast<size_t>((t * half + i) * 2)] = factor * std::cos(angle);
      table[static_cast<size_t>((t * half + i) * 2 + 1)] = factor * std::sin(angle);
    }
  }
  copy_from_doubles(ops_, rope_table_, table);
}

void GptModel::init_parameters(uint64_t seed) {
  // Sharded values are drawn a unit at a time in its windows (the units' parameters come one
  // unit after another), of which the rank keeps its shards before the next unit takes them.
  const auto keep = [&](int unit) {
    if (!params_.values_sharded() || unit < 0) return;
    for (const UnitPart part : kUnitParts)
      params_.keep_shard(ops_, static_cast<size_t>(unit), part, params_.unit_values(static_cast<size_t>(unit), part));
  };
  int unit = -1;
  for (const Parameter& p : params_.all()) {
    if (p.unit != unit) keep(std::exchange(unit, p.unit));
    init_parameter(p, seed);
  }
  keep(unit);
  zero_grad();
}

void GptModel::init_parameter(const Parameter& p, uint64_t seed) {
  // Drawn where the parameter lives, each element by its index in the whole parameter from the
  // parameter's own stream (kernels/counter_random.h): a split model starts from the same
  // weights as one rank, and every backend from the same bits. Rows past real_rows (the
  // vocabulary's padding) are zero.
  const int64_t real_rows = p.local_real_rows();
  if (p.init == Init::Zeros || real_rows < p.value.shape[0]) ops_.fill(p.value, 0.0);
  if (p.init == Init::Ones) ops_.fill(p.value.slice(0, real_rows), 1.0);
  if (p.init != Init::Normal) return;
  const Tensor flat = p.value.view({p.value.numel()});
  for (const PieceRun& run : p.runs()) {
    const int64_t rows = std::clamp<int64_t>(p.real_rows - run.whole / run.whole_stride, 0, run.rows);
    if (rows == 0) continue;
    ops_.fill_normal(flat.slice(run.piece, flat.numel()),
                     {rows, run.cols, run.piece_stride, run.whole, run.whole_stride}, seed,
                     stable_hash(p.name), 0.0, p.std);
  }
}

int64_t GptModel::check_batch(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t,
                              const DocumentResets& resets) const {
  KILN_CHECK(b >= 1 && b <= micro_batch_ && t >= 1 && t <= config_.seq_len,
             "batch of " + std::to_string(b) + "x" + std::to_string(t) +
                 " exceeds the model's layout " + std::to_string(micro_batch_) + "x" +
                 std::to_string(config_.seq_len));
  for (int64_t i = 0; i < b * t; ++i)
    KILN_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size,
               "token id " + std::to_string(tokens[i]) + " is outside model.vocab_size=" +
                   std::to_string(config_.vocab_size));
  int64_t count = 0;
  for (int64_t i = 0; targets && i < b * t; ++i) {
    KILN_CHECK(targets[i] < config_.vocab_size,
               "target id " + std::to_string(targets[i]) + " is outside model.vocab_size");
    if (targets[i] >= 0) ++count;
  }
  const auto where = [t](int64_t i) {
    return " at row " + std::to_string(i / t) + ", column " + std::to_string(i % t);
  };
  for (int64_t i = 0; resets.positions && i < b * t; ++i)
    KILN_CHECK(resets.positions[i] >= 0 && resets.positions[i] < config_.seq_len,
               "position id " + std::to_string(resets.positions[i]) + where(i) +
                   " is outside [0, model.seq_len=" + std::to_string(config_.seq_len) + ")");
  for (int64_t i = 0; resets.attention_starts && i < b * t; ++i)
    KILN_CHECK(resets.attention_starts[i] >= 0 && resets.attention_starts[i] <= i % t,
               "attention start " + std::to_string(resets.attention_starts[i]) + where(i) +
                   " is outside [0, its column]");
  return count;
}

void GptModel::set_batch(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t,
                         int slot, const DocumentResets& resets, DropoutDraw dropout) {
  const size_t s = static_cast<size_t>(slot);
  target_count_[s] = check_batch(tokens, targets, b, t, resets);
  has_targets_[s] = targets != nullptr;
  if (context_parallel()) {
    // This rank keeps its chunks of each sequence, and their places in it: the positions
    // (the whole sequence's, or the documents' under position resets) and the key starts,
    // which ring attention compares with token indices of the whole sequence.
    KILN_CHECK(t == config_.seq_len, "context parallelism splits whole sequences: a batch of " +
                                         std::to_string(t) + " tokens a row, model.seq_len=" +
                                         std::to_string(config_.seq_len));
    std::vector<int32_t> indices;  // each token's own place, where the resets give no positions
    for (int64_t i = 0; !resets.positions && i < b * t; ++i) indices.push_back(static_cast<int32_t>(i % t));
    ContextChunks& mine = context_chunks_;
    keep_context_chunks(mine.tokens, tokens, b);
    keep_context_chunks(mine.targets, targets, b);
    keep_context_chunks(mine.positions, resets.positions ? resets.positions : indices.data(), b);
    keep_context_chunks(mine.key_starts, resets.attention_starts, b);
    load_batch(mine.tokens.data(), targets ? mine.targets.data() : nullptr, b, t / split_.cp(), slot,
               {mine.positions.data(), resets.attention_starts ? mine.key_starts.data() : nullptr}, false);
  } else {
    load_batch(tokens, targets, b, t, slot, resets, false);
  }
  batch_[s].dropout = dropout;
}

void GptModel::queue_batch(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t,
                           const DocumentResets& resets) {
  KILN_CHECK(!tp_split() && !context_parallel() && chunks_.size() == 1,
             "queue_batch: only a model whole on one rank loads its batch without the host");
  has_targets_[0] = targets != nullptr;
  load_batch(tokens, targets, b, t, 0, resets, true);
}

void GptModel::keep_context_chunks(std::vector<int32_t>& mine, const int32_t* whole, int64_t b) const {
  mine.clear();
  if (!whole) return;
  const int64_t T = config_.seq_len;
  for (int64_t row = 0; row < b; ++row)
    for (const int32_t t : context_.tokens()) mine.push_back(whole[row * T + t]);
}

void GptModel::load_batch(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t, int slot,
                          const DocumentResets& resets, bool queued) {
  const size_t s = static_cast<size_t>(slot);
  Batch& batch = batch_[s];
  batch = Batch{b, t, slot, split_.sequence_parts()};
  KILN_CHECK(t % batch.parts == 0,
             "a batch of " + std::to_string(t) + " tokens a row does not split into the " +
                 std::to_string(batch.parts) + " sequence-parallel shares");
  const auto copy = [&](const Tensor& dst, const int32_t* host) {
    if (queued) {
      ops_.copy_from_pinned(dst, host);
    } else {
      ops_.copy_from_host(dst, host);
    }
  };
  copy(batch.of(slot_[s].tokens), tokens);
  if (targets) copy(batch.of(slot_[s].targets), targets);
  if (tp_split()) set_local_ids(tokens, targets, b * t, slot);
  if (resets.positions) {
    batch.positions = batch.of(slot_[s].positions);
    copy(batch.positions, resets.positions);
  }
  if (resets.attention_starts) {
    batch.key_starts = batch.of(slot_[s].key_starts);
    copy(batch.key_starts, resets.attention_starts);
  }
  if (!mtp_.empty() && targets) {
    KILN_CHECK(!queued, "queue_batch: multi-token prediction's targets are set from the host");
    set_mtp_ids(tokens, targets, b, t, slot, resets);
  }
}

int GptModel::unit_after(int chunk, size_t block) const {
  const PipelineChunk& c = chunks_[static_cast<size_t>(chunk)];
  if (block < static_cast<size_t>(c.layers())) return block_unit_[first_block_[static_cast<size_t>(chunk)] + block];
  return c.head ? head_unit_ : -1;
}

bool GptModel::forward_to_logits(int slot, int chunk) {
  const size_t s = static_cast<size_t>(slot);
  const Batch batch = chunk_batch(slot, chunk);
  const ChunkSlot& a = chunk_slot(slot, chunk);
  const PipelineChunk& c = chunks_[static_cast<size_t>(chunk)];
  const std::vector<Tensor>& residual = a.residual;
  if (c.embedding) {
    // Each tensor-parallel rank embeds the tokens of its vocabulary slice (zero rows for the
    // rest) and the sum over the group is the whole embedding; the first rank adds the
    // positions, once.
    // Under sequence parallelism the sum is reduce-scattered: each rank keeps its tokens' share.
    const bool positions_here = !config_.is_llama() && split_.tp_rank() == 0;
    if (hooks_) hooks_->before_reading(embedding_unit_, unit_after(chunk, 0));
    embed(batch, batch.share_of(residual[0]), batch.of(slot_[s].local_tokens), wte_.value,
          positions_here ? wpe_.value : Tensor{});
  }
  const size_t first = first_block_[static_cast<size_t>(chunk)], layers = static_cast<size_t>(c.layers());
  for (size_t l = 0; l < layers; ++l) {
    if (hooks_) hooks_->before_reading(block_unit_[first + l], unit_after(chunk, l + 1));
    blocks_[first + l].forward(ops_, batch, batch.share_of(residual[l + 1]),
                               batch.share_of(residual[l]), block_scratch_);
  }
  if (!c.head) return false;
  if (hooks_) hooks_->before_reading(head_unit_, -1);
  const Tensor final_out = batch.share_of(a.final_norm_out);
  final_norm_.forward(ops_, batch, final_out, batch.share_of(residual.back()));
  lm_head_.forward(ops_, batch, batch.of(a.logits), final_out);
  return has_targets_[s];
}

void GptModel::embed(const Batch& batch, const Tensor& embedded, const Tensor& ids, const Tensor& weight,
                     const Tensor& positions) {
  const Tensor whole = sequence_parallel() ? sequence_.whole(batch) : embedded;
  ops_.embedding_forward(whole, ids, weight, positions, batch.positions);
  if (sequence_parallel()) {
    sequence_.scatter(embedded, whole);
  } else if (tp_split()) {
    split_.tensor->all_reduce(embedded, ReduceOp::Sum);
  }
}

double GptModel::forward(int slot, int chunk) {
  if (!forward_to_logits(slot, chunk)) return 0.0;
  const size_t s = static_cast<size_t>(slot);
  const Batch& batch = batch_[s];
  const ChunkSlot& a = chunk_slot(slot, chunk);
  const double sum = cross_entropy_sum(batch, batch.of(a.losses), batch.of(a.lse), batch.of(a.logits),
                                       batch.of(slot_[s].local_targets), slot_[s].local_targets_host);
  if (!mtp_.empty()) mtp_forward(slot, chunk);
  // Under context parallelism each rank holds part of the micro-batch's targets: the loss
  // sums over the group, over the whole micro-batch's count.
  double whole = sum;
  if (context_parallel()) split_.context->all_reduce(Tensor{&whole, DType::F64, {1}}, ReduceOp::Sum);
  return mean_loss(whole, target_count_[s]);
}

double GptModel::cross_entropy_sum(const Batch& batch, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                                   const Tensor& targets, const std::vector<int32_t>& host) {
  const Tensor flat = logits.view({batch.b * batch.t, logits.shape.cols()});
  if (tp_split()) return vocab_parallel_cross_entropy(ops_, *split_.tensor, losses, lse, flat, targets, host, local_vocab_);
  ops_.cross_entropy_forward(losses, lse, flat, targets, config_.vocab_size);
  return loss_sum(copy_to_doubles(ops_, losses));
}

void GptModel::queue_cross_entropy(int slot) {
  const size_t s = static_cast<size_t>(slot);
  const Batch& batch = batch_[s];
  const ChunkSlot& a = chunk_slot(slot, head_chunk());
  const Tensor logits = batch.of(a.logits);
  ops_.cross_entropy_forward(batch.of(a.losses), batch.of(a.lse),
                             logits.view({batch.b * batch.t, logits.shape.cols()}), batch.of(slot_[s].targets),
                             config_.vocab_size);
}

void GptModel::queue_forward() {
  KILN_CHECK(!tp_split() && !context_parallel() && chunks_.size() == 1 && mtp_.empty(),
             "queue_forward: only a model whole on one rank, without multi-token prediction, keeps its loss on the "
             "device");
  KILN_CHECK(forward_to_logits(0, 0), "queue_forward needs a batch with targets");
  queue_cross_entropy(0);
}

Tensor GptModel::token_losses(int slot) const {
  const size_t s = static_cast<size_t>(slot);
  return batch_[s].of(chunk_slot(slot, head_chunk()).losses);
}

double GptModel::loss_sum(std::span<const double> losses) {
  double sum = 0;
  for (double v : losses) sum += v;
  return sum;
}

double GptModel::mean_loss(double sum, int64_t target_count) {
  return target_count > 0 ? sum / static_cast<double>(target_count) : 0.0;
}

void GptModel::backward(double dloss, int slot,
                        const std::function<void(int64_t)>& gradients_ready, int chunk) {
  backward_pass(dloss, slot, gradients_ready, chunk, false);
}

void GptModel::backward_input(double dloss, int slot, int chunk) {
  KILN_CHECK(split_.split_backward, "backward_input: the model was laid out without ModelSplit::split_backward");
  KILN_CHECK(!hooks_, "a split backward does not run under parallel.shard=gradients|parameters yet");
  backward_pass(dloss, slot, {}, chunk, true);
}

void GptModel::backward_pass(double dloss, int slot, const std::function<void(int64_t)>& gradients_ready, int chunk,
                             bool defer_weights) {
  std::function<void()> ready = report_ready(chunk, gradients_ready);
  const size_t s = static_cast<size_t>(slot);
  Batch batch = chunk_batch(slot, chunk);
  batch.defer_weights = defer_weights;
  const ChunkSlot& a = chunk_slot(slot, chunk);
  const PipelineChunk& c = chunks_[static_cast<size_t>(chunk)];
  const std::vector<Tensor>& residual = a.residual;
  const Tensor d_residual = batch.share_of(d_residual_);
  const size_t first = first_block_[static_cast<size_t>(chunk)];
  const auto block_before = [&](size_t l) { return l > 0 ? block_unit_[first + l - 1] : -1; };
  if (c.head) {
    KILN_CHECK(has_targets_[s], "backward needs a batch with targets");
    if (hooks_) {
      hooks_->before_gradients(head_unit_);
      hooks_->before_reading(head_unit_, block_before(static_cast<size_t>(c.layers())));
    }
    // The modules' backward runs first: it uses the blocks' scratch, d_final's among it.
    const Tensor d_mtp = mtp_.empty() ? Tensor{} : mtp_backward(slot, chunk, dloss);
    const Tensor logits = batch.of(a.logits);
    const Tensor flat_logits = logits.view({batch.b * batch.t, logits.shape.cols()});
    ops_.cross_entropy_backward(flat_logits, flat_logits, batch.of(a.lse),
                                batch.of(slot_[s].local_targets), local_vocab_, dloss);
    const Tensor d_final = batch.share_of(block_scratch_.d_norm_out);
    lm_head_.backward(ops_, batch, d_final, logits, batch.share_of(a.final_norm_out));
    if (!d_mtp.empty()) ops_.add(d_final, d_final, d_mtp);
    ops_.fill(d_residual, 0.0);
    final_norm_.backward(ops_, batch, d_residual, d_final, batch.share_of(residual.back()));
    if (hooks_) hooks_->after_gradients(head_unit_);
    ready();
  }
  for (size_t l = static_cast<size_t>(c.layers()); l-- > 0;) {
    if (hooks_) {
      hooks_->before_gradients(block_unit_[first + l]);
      hooks_->before_reading(block_unit_[first + l], block_before(l));
    }
    if (split_.recompute == Recompute::Full)
      blocks_[first + l].forward(ops_, batch, batch.share_of(residual[l + 1]),
                                 batch.share_of(residual[l]), block_scratch_);
    blocks_[first + l].backward(ops_, batch, d_residual, batch.share_of(residual[l]),
                                block_scratch_, dloss);
    if (hooks_) hooks_->after_gradients(block_unit_[first + l]);
    ready();
  }
  if (!c.embedding || wte_.frozen) return;
  // The embedding's rows take gradients from every token: gathered whole.
  const Tensor d_embedded = sequence_parallel() ? sequence_.gather_gradient(batch, d_residual) : d_residual;
  if (defer_weights) {
    ops_.cast(batch.of(a.embedding_grad), d_embedded);
    return;
  }
  if (hooks_) hooks_->before_gradients(embedding_unit_);
  embedding_backward(slot, batch, d_embedded);
  if (hooks_) hooks_->after_gradients(embedding_unit_);
}

std::function<void()> GptModel::report_ready(int chunk, const std::function<void(int64_t)>& gradients_ready) const {
  if (!gradients_ready) return [] {};
  return [&after = ready_after_[static_cast<size_t>(chunk)], gradients_ready, done = size_t{0}]() mutable {
    gradients_ready(after[done++]);
  };
}

void GptModel::embedding_backward(int slot, const Batch& batch, const Tensor& d_embedded) {
  ops_.embedding_backward(wte_.grad, config_.is_llama() ? Tensor{} : wpe_.grad,
                          batch.of(slot_[static_cast<size_t>(slot)].local_tokens), d_embedded, batch.positions);
}

void GptModel::backward_weights(int slot, int chunk, const std::function<void(int64_t)>& gradients_ready) {
  KILN_CHECK(split_.split_backward, "backward_weights: the model was laid out without ModelSplit::split_backward");
  std::function<void()> ready = report_ready(chunk, gradients_ready);
  const Batch batch = chunk_batch(slot, chunk);
  const PipelineChunk& c = chunks_[static_cast<size_t>(chunk)];
  // In backward's order, so that each gradient adds up as it does there (the tied output
  // layer's before the embedding's), and the flat buffer's leading part is final first.
  if (c.head) {
    lm_head_.backward_weights(ops_, batch);
    final_norm_.backward_weights(ops_, batch);
    ready();
  }
  const size_t first = first_block_[static_cast<size_t>(chunk)];
  for (size_t l = static_cast<size_t>(c.layers()); l-- > 0;) {
    blocks_[first + l].backward_weights(ops_, batch);
    ready();
  }
  if (c.embedding && !wte_.frozen) embedding_backward(slot, batch, batch.of(chunk_slot(slot, chunk).embedding_grad));
}

Tensor GptModel::chunk_input(int slot, int chunk) const {
  return batch_[static_cast<size_t>(slot)].share_of(chunk_slot(slot, chunk).residual.front());
}

Tensor GptModel::chunk_output(int slot, int chunk) const {
  return batch_[static_cast<size_t>(slot)].share_of(chunk_slot(slot, chunk).residual.back());
}

void GptModel::begin_micro_batch(int slot, int micro) {
  KILN_CHECK(micro >= 0, "begin_micro_batch: a micro-batch's number is >= 0");
  micro_of_slot_[static_cast<size_t>(slot)] = micro;
}

int GptModel::chunk_slots(int chunk) const {
  return split_.chunk_slots.empty() ? slots_ : split_.chunk_slots[static_cast<size_t>(chunk)];
}

Batch GptModel::chunk_batch(int slot, int chunk) const {
  Batch batch = batch_[static_cast<size_t>(slot)];
  batch.slot = micro_of_slot_[static_cast<size_t>(slot)] % chunk_slots(chunk);
  return batch;
}

const GptModel::ChunkSlot& GptModel::chunk_slot(int slot, int chunk) const {
  return chunk_slot_[static_cast<size_t>(chunk)][static_cast<size_t>(chunk_batch(slot, chunk).slot)];
}

Tensor GptModel::residual_gradient(int slot) const {
  return batch_[static_cast<size_t>(slot)].share_of(d_residual_);
}

bool GptModel::follows_own_chunk(int chunk) const {
  return chunk > 0 && chunks_[static_cast<size_t>(chunk - 1)].end_layer == chunks_[static_cast<size_t>(chunk)].first_layer;
}

Tensor GptModel::handed_gradient(int slot) const {
  return batch_[static_cast<size_t>(slot)].share_of(slot_[static_cast<size_t>(slot)].handed_gradient);
}

void GptModel::zero_grad() {
  if (params_.units().empty()) return ops_.fill(params_.flat_grads(), 0.0);
  for (size_t u = 0; u < params_.units().size(); ++u)
    for (const UnitPart part : kUnitParts)
      if (params_.units()[u].whole_step() && params_.units()[u].has(part)) ops_.fill(params_.unit_grads(u, part), 0.0);
}

void GptModel::logits_row(int64_t row, std::vector<float>& out, int slot) const {
  KILN_CHECK(!tp_split(), "logits_row: this model holds one tensor-parallel slice of the "
                          "vocabulary");
  KILN_CHECK(has_embedding() && has_head(), "logits_row: this model holds one pipeline stage");
  const Batch& batch = batch_[static_cast<size_t>(slot)];
  const Tensor logits = batch.of(chunk_slot(slot, head_chunk()).logits).view({batch.b * batch.t, config_.padded_vocab()});
  const std::vector<double> full = copy_to_doubles(ops_, logits.slice(row, row + 1));
  out.assign(full.begin(), full.begin() + config_.vocab_size);
}

void GptModel::set_local_ids(const int32_t* tokens, const int32_t* targets, int64_t n, int slot) {
  Slot& a = slot_[static_cast<size_t>(slot)];
  const Batch& batch = batch_[static_cast<size_t>(slot)];
  std::vector<int32_t> local(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) local[i] = local_token(tokens[i]);
  ops_.copy_from_host(batch.of(a.local_tokens), local.data());
  if (!targets) return;
  a.local_targets_host.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) a.local_targets_host[i] = local_target(targets[i]);
  ops_.copy_from_host(batch.of(a.local_targets), a.local_targets_host.data());
}

int32_t GptModel::local_token(int32_t id) const {
  // Out of the slice's range it selects nothing (ops.h).
  return static_cast<int32_t>(id - vocab_start_);
}

int32_t GptModel::local_target(int32_t id) const {
  const int64_t t = id - vocab_start_;
  return id < 0 ? -1 : static_cast<int32_t>(t >= 0 && t < local_vocab_ ? t : local_vocab_);
}

MoeMlp* GptModel::experts(int layer) {
  for (TransformerBlock& block : blocks_)
    if (block.layer() == layer) return block.experts();
  for (MtpModule& module : mtp_)
    if (module.block().layer() == layer) return module.block().experts();
  return nullptr;
}

const MoeMlp* GptModel::experts(int layer) const {
  return const_cast<GptModel*>(this)->experts(layer);
}

std::vector<ArenaSize> GptModel::arenas() const {
  std::vector<ArenaSize> arenas{{"parameters", params_.value_bytes()},
                                {"gradients", params_.grad_bytes()},
                                {"activations", activations_.bytes()},
                                {"scratch", scratch_.bytes()}};
  if (!params_.units().empty()) arenas.push_back({"unit windows", params_.window_bytes()});
  if (split_.recompute != Recompute::None) arenas.push_back({"recomputed", recomputed_.bytes()});
  if (split_.split_backward) arenas.push_back({"weight gradient inputs", weight_inputs_.bytes()});
  if (fp8_) arenas.push_back({"fp8", fp8_->bytes()});
  if (params_.freezes_base()) arenas.push_back({"frozen parameters", params_.frozen_bytes()});
  return arenas;
}

std::vector<ArenaSize> GptModel::memory() const {
  std::vector<ArenaSize> all = arenas();
  all.push_back({"op workspace", workspace_bytes_});
  return all;
}

}  // namespace kiln
