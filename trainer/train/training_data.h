// A run's data: the tokenizer, the training and validation samples as Megatron's GPT dataset
// draws them, and the batch they are read into, each checked against the model.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/data/gpt_dataset.h"
#include "trainer/data/sample_source.h"
#include "trainer/data/token_batch.h"
#include "trainer/data/tokenizer.h"
#include "trainer/model/gpt_model.h"

namespace kiln {

class TrainingData {
 public:
  // Loads the tokenizer and opens the training and validation samples; what the datasets
  // say about their cached indices goes to `notes`.
  TrainingData(const Config& config, std::FILE* notes);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const SampleSource& train() const { return *train_data_; }
  // Null without a valid split or eval_iters.
  const SampleSource* valid() const { return valid_data_.get(); }

  // One micro-batch of `data` from `first_sample` on, read into the batch.
  const TokenBatch& read(const SampleSource& data, int64_t first_sample);
  // The same, handed to the model's activation slot `slot`: from train(), with the draw of
  // LoRA's dropout masks for those samples.
  void fill(GptModel& model, const SampleSource& data, int64_t first_sample, int slot = 0);
  // The last batch's targets that are trained (not masked).
  int64_t trained_targets() const { return batch_->trained_targets(); }
  // Bytes of text behind the last batch's targets.
  int64_t target_text_bytes() const { return batch_->target_text_bytes(token_bytes_); }

 private:
  // The samples of one split, as data.samples cuts them.
  std::unique_ptr<SampleSource> open_data(const GptDatasetSpec& spec, std::FILE* notes) const;

  const Config& config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int64_t> token_bytes_;  // bytes of text per id (0 for end-of-document, padding)
  std::unique_ptr<SampleSource> train_data_;
  std::unique_ptr<SampleSource> valid_data_;
  std::unique_ptr<TokenBatch> batch_;
};

}  // namespace kiln
