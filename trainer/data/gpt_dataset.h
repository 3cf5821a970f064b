// Megatron's GPT dataset over one split of one indexed dataset (PREFIX.bin + .idx).
//
// The split's documents are a contiguous run of the file's documents, chosen by the split
// weights as Megatron chooses them. Its samples are windows of seq_len + 1 tokens that run
// across document boundaries, visited in a shuffled order; the document, sample and
// shuffle indices (trainer/data/gpt_indices.h) are built once for the requested number of
// samples and cached as .npy files beside the data (trainer/data/index_cache.h), then
// memory-mapped, so a run starts at once the second time and every rank reads the same
// indices. docs/data.md explains the whole scheme.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "trainer/data/gpt_indices.h"
#include "trainer/data/index_cache.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/npy_file.h"
#include "trainer/data/sample_source.h"

namespace kiln {

// Parses "98,2,0"-style weights (1 to 3 non-negative numbers, missing ones are 0, not all
// 0) and returns the document boundaries of the three splits over num_documents documents:
// {0, b1, b2, num_documents}, split i being [b[i], b[i+1]). Megatron's rule: the weights
// are normalised and each boundary is round(cumulative fraction * num_documents), rounding
// half to even as Python does. Throws kiln::Error on malformed weights.
std::vector<int64_t> split_boundaries(const std::string& weights, int64_t num_documents);

struct GptDatasetSpec {
  std::string prefix;
  std::string split = "969,30,1";  // train, valid, test weights over documents
  Split which = Split::Train;
  int64_t num_samples = 0;  // requested: the indices cover at least this many; 0: one epoch
  int seq_len = 0;
  uint64_t seed = 0;
  std::string cache_dir;  // empty: PREFIX's folder/cache
};

class GptDataset final : public SampleSource {
 public:
  // Loads the cached indices, or builds and caches them, printing one line to log (when
  // given) about which it did. kiln::Error on bad data, an empty split or a bad spec.
  explicit GptDataset(const GptDatasetSpec& spec, std::FILE* log = nullptr);

  int64_t num_samples() const override { return static_cast<int64_t>(shuffle_.size()); }
  void sample(int64_t index, int32_t* out) const override;
  bool has_loss_mask() const override { return mask_.has_value(); }
  void loss_mask(int64_t index, int32_t* out) const override;
  int64_t window() const { return int64_t{spec_.seq_len} + 1; }  // tokens a sample holds
  int64_t num_tokens() const override { return num_tokens_; }
  int32_t max_token_id() const override { return max_token_id_; }
  std::string describe() const override;

  int64_t num_documents() const { return last_document_ - first_document_; }
  int64_t num_epochs() const { return plan_.num_epochs; }
  // Where the index arrays are (ARRAY = document_index, sample_index, shuffle_index).
  const std::string& cache_stem() const { return cache_stem_; }

 private:
  nlohmann::json description() const;
  void build(IndexCache& cache);
  void load(const IndexCache& cache);
  void check_indices() const;
  int32_t scan_max_token() const;
  // Reads sample `index`'s window of `from` (the tokens, or their loss mask).
  void read_window(const IndexedDataset& from, int64_t index, int32_t* out) const;

  GptDatasetSpec spec_;
  IndexedDataset data_;
  std::optional<IndexedDataset> mask_;  // trainer/data/loss_mask.h
  int64_t first_document_ = 0, last_document_ = 0;  // the split: [first, last)
  int64_t num_tokens_ = 0;
  EpochPlan plan_;  // epochs of the split the requested samples need
  int32_t max_token_id_ = 0;
  std::string cache_stem_;
  NpyArray document_index_file_, sample_index_file_, shuffle_index_file_;
  std::span<const int32_t> document_index_;
  std::span<const int64_t> sample_index_;  // (samples + 1) x 2
  std::span<const int64_t> shuffle_;
};

}  // namespace kiln
