#include "trainer/train/training_data.h"

#include <fmt/core.h>

#include "base/check.h"
#include "trainer/data/blended_dataset.h"
#include "trainer/data/data_presence.h"
#include "trainer/data/document_samples.h"
#include "trainer/data/tokenizer.h"

namespace kiln {

TrainingData::TrainingData(const Config& config, std::FILE* notes) : config_(config) {
  const ModelConfig& m = config_.model;
  check_data_present(config_.data);
  tokenizer_ = load_tokenizer(config_.data.tokenizer);
  const int32_t tokenizer_ids = tokenizer_->vocab_size();
  if (m.vocab_size < tokenizer_ids)
    fail(fmt::format("model.vocab_size={} is smaller than the tokenizer's {} ids (data.tokenizer={})",
                     m.vocab_size, tokenizer_ids, config_.data.tokenizer));
  token_bytes_ = text_bytes_per_id(*tokenizer_, m.vocab_size);
  // Megatron's sample counts: every step's global batch; validation reads the same first
  // eval_iters micro-batches each time, so its losses compare across the run.
  const TrainConfig& tc = config_.train;
  GptDatasetSpec spec;
  spec.split = config_.data.split;
  spec.seq_len = m.seq_len;
  spec.seed = tc.seed;
  spec.cache_dir = config_.data.cache_dir;
  // A run that may rewind past a loss spike skips batches of data each time: they are drawn too.
  spec.num_samples = (static_cast<int64_t>(tc.steps) + config_.alerts.rewind_reserve()) * tc.global_batch;
  train_data_ = open_data(spec, notes);
  if (config_.data.split_fractions()[1] > 0 && tc.eval_iters > 0) {
    spec.which = Split::Valid;
    spec.num_samples = static_cast<int64_t>(tc.eval_iters) * tc.micro_batch;
    valid_data_ = open_data(spec, notes);
  }
  for (const SampleSource* data : {train_data_.get(), valid_data_.get()}) {
    if (data && data->max_token_id() >= m.vocab_size)
      fail(fmt::format("data: token id {} in {} is outside model.vocab_size={}",
                       data->max_token_id(), data->describe(), m.vocab_size));
  }
  batch_ = std::make_unique<TokenBatch>(DocumentOptions{
      tokenizer_->eod(), config_.data.eod_mask_loss, config_.data.reset_position_ids,
      config_.data.reset_attention_mask});
}

std::unique_ptr<SampleSource> TrainingData::open_data(const GptDatasetSpec& spec, std::FILE* notes) const {
  const DataConfig& d = config_.data;
  if (d.samples == "stream") return open_samples(d.paths, spec, notes);
  DocumentSamplesSpec whole;
  whole.prefix = parse_data_paths(d.paths).front().prefix;
  whole.split = spec.split;
  whole.which = spec.which;
  whole.num_samples = spec.num_samples;
  whole.seq_len = spec.seq_len;
  whole.seed = static_cast<uint32_t>(spec.seed % (uint64_t{1} << 32));
  whole.pack = d.samples == "packed";
  whole.pad = tokenizer_->pad();
  return std::make_unique<DocumentSamples>(whole);
}

const TokenBatch& TrainingData::read(const SampleSource& data, int64_t first_sample) {
  batch_->fill(data, first_sample, config_.train.micro_batch, config_.model.seq_len);
  return *batch_;
}

void TrainingData::fill(GptModel& model, const SampleSource& data, int64_t first_sample, int slot) {
  const TokenBatch& batch = read(data, first_sample);
  // Training samples draw LoRA's dropout masks by their number; validation's draw none.
  const DropoutDraw dropout = &data == train_data_.get() ? DropoutDraw{config_.train.seed, first_sample} : DropoutDraw{};
  model.set_batch(batch.tokens(), batch.targets(), config_.train.micro_batch, config_.model.seq_len, slot,
                  {batch.positions(), batch.attention_starts()}, dropout);
}

}  // namespace kiln
