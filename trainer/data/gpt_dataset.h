// The training dataset, minimal form: one or more indexed datasets read as one corpus,
// split by documents into train/valid/test, cut into windows of seq_len + 1 tokens.
// (Megatron's full GPT dataset, with cached document/sample/shuffle indices and blending,
// extends this later; docs/data.md describes what this one does.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/indexed_dataset.h"

namespace kiln {

enum class Split { Train, Valid, Test };

const char* split_name(Split split);  // "train", "valid", "test"

// Parses "98,2,0"-style weights (1 to 3 non-negative numbers, missing ones are 0, not all
// 0) and returns the document boundaries of the three splits over num_documents documents:
// {0, b1, b2, num_documents}, split i being [b[i], b[i+1]). Megatron's rule: the weights
// are normalised and each boundary is round(cumulative fraction * num_documents), rounding
// half to even as Python does. Throws kiln::Error on malformed weights.
std::vector<int64_t> split_boundaries(const std::string& weights, int64_t num_documents);

class GptDataset {
 public:
  // prefixes: one or more indexed datasets, their documents taken in order as one corpus.
  // split_weights: "98,2,0"-style weights; documents are split contiguously by them.
  GptDataset(const std::vector<std::string>& prefixes, const std::string& split_weights,
             Split which, int seq_len, uint64_t seed);

  // Samples of seq_len + 1 tokens in one pass: (num_tokens() - 1) / seq_len.
  int64_t num_samples() const { return num_samples_; }
  // Tokens in this split.
  int64_t num_tokens() const { return num_tokens_; }
  int seq_len() const { return seq_len_; }
  // Largest id in the split's tokens, so the trainer can check it against the vocabulary.
  int32_t max_token_id() const { return max_token_id_; }

  // Fills out[0..seq_len] (seq_len + 1 tokens) with sample `index`. Sample k covers tokens
  // [k*seq_len, k*seq_len + seq_len + 1) of the split's token stream (documents
  // concatenated, windows cross document boundaries; neighbouring samples share one token,
  // the last target of one being the first input of the next). Train visits the samples in
  // a seeded shuffled order, reshuffled each epoch (index >= num_samples() is the next
  // epoch); Valid and Test in order, wrapping. Thread-safe: it only reads.
  void sample(int64_t index, int32_t* out) const;

  // Which sample of the stream `index` visits (the shuffle alone, for tests and tools).
  int64_t sample_position(int64_t index) const;

 private:
  // A contiguous run of one dataset's .bin that belongs to this split.
  struct Range {
    size_t dataset;
    int64_t begin;   // token offset in that dataset's .bin
    int64_t length;  // tokens
    int64_t start;   // token offset of this range in the split's stream
  };

  void read_stream(int64_t position, int64_t count, int32_t* out) const;
  int32_t scan_max_token() const;

  std::vector<IndexedDataset> datasets_;
  std::vector<Range> ranges_;
  Split split_;
  int seq_len_;
  uint64_t seed_;
  int64_t num_tokens_ = 0;
  int64_t num_samples_ = 0;
  int32_t max_token_id_ = 0;
};

}  // namespace kiln
