// Samples made of whole documents, for fine-tuning on conversations (docs/finetune.md): where
// Megatron's GPT dataset (gpt_dataset.h) cuts one stream of documents into windows, so that a
// conversation may start in one sample and end in the next, these keep each document whole:
//   packed  documents, in a shuffled order, go one after another into a sample of seq_len + 1
//           tokens while they fit (greedy, in order); the rest of the sample is padding. With
//           data.reset_attention_mask and reset_position_ids (which packing requires) each
//           document sees only itself, as if it were alone.
//   padded  one document a sample, padded.
// A document longer than a sample is cut to it (counted: describe() says how many). Padding
// is the end-of-document token, never trained: these samples always have a loss mask, the
// dataset's own (trainer/data/loss_mask.h) or, without one, every real token trained. Each
// epoch visits the split's documents in a new order (numpy's shuffle, seeded by the seed and
// the epoch), and epochs follow one another until there are the samples asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainer/data/indexed_dataset.h"
#include "trainer/data/sample_source.h"

namespace kiln {

struct DocumentSamplesSpec {
  std::string prefix;
  std::string split = "969,30,1";
  Split which = Split::Train;
  int64_t num_samples = 0;  // at least this many; 0: one epoch
  int seq_len = 0;
  uint32_t seed = 0;
  bool pack = true;  // packed, else padded
  int32_t pad = 0;   // the padding token: the tokenizer's end of document
};

class DocumentSamples final : public SampleSource {
 public:
  explicit DocumentSamples(const DocumentSamplesSpec& spec);

  int64_t num_samples() const override { return static_cast<int64_t>(samples_.size()) - 1; }
  void sample(int64_t index, int32_t* out) const override;
  bool has_loss_mask() const override { return true; }
  void loss_mask(int64_t index, int32_t* out) const override;
  int64_t num_tokens() const override { return num_tokens_; }
  int32_t max_token_id() const override { return max_token_id_; }
  std::string describe() const override;

 private:
  // The documents of sample `index`, each cut to what is left of the window, then the padding:
  // `document(d, begin, count, out)` writes a document's part; `pad` the rest.
  template <typename Document, typename Pad>
  void fill(int64_t index, Document&& document, Pad&& pad) const;

  DocumentSamplesSpec spec_;
  IndexedDataset data_;
  std::optional<IndexedDataset> mask_;
  int64_t first_document_ = 0, last_document_ = 0;
  int64_t num_tokens_ = 0;
  int32_t max_token_id_ = 0;
  int64_t epochs_ = 0, cut_documents_ = 0;
  std::vector<int32_t> order_;  // documents in visiting order, epoch after epoch
  std::vector<int64_t> samples_;  // sample i holds order_[samples_[i] .. samples_[i + 1])
};

}  // namespace kiln
