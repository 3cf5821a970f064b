// What the trainer reads training and validation samples from: a GPT dataset over one
// indexed dataset's split, or a blend of several (trainer/data/blended_dataset.h).
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

enum class Split { Train, Valid, Test };

const char* split_name(Split split);  // "train", "valid", "test"

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Samples in the order they are visited, at least as many as were asked for.
  virtual int64_t num_samples() const = 0;
  // Fills out[0..seq_len] (seq_len + 1 tokens) with the index-th sample visited, index in
  // [0, num_samples()). Thread-safe: it only reads.
  virtual void sample(int64_t index, int32_t* out) const = 0;
  // Whether samples come with a loss mask (a dataset of conversations, or samples padded).
  virtual bool has_loss_mask() const { return false; }
  // Fills out[0..seq_len] with the index-th sample's mask: 1 where its token is trained, 0
  // where it is only context or padding. Only where has_loss_mask().
  virtual void loss_mask(int64_t index, int32_t* out) const;
  // Tokens in one pass over the split (over every dataset of a blend).
  virtual int64_t num_tokens() const = 0;
  // The largest token id in the split, so the trainer can check it against the vocabulary.
  virtual int32_t max_token_id() const = 0;
  // One line for the log: where the samples come from.
  virtual std::string describe() const = 0;
};

}  // namespace kiln
