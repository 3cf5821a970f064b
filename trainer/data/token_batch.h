// A micro-batch cut from samples: the inputs and targets of each window of seq_len + 1
// tokens, and Megatron's optional treatment of end-of-document tokens inside a window
// (its get_ltor_masks_and_position_ids):
//   eod_mask_loss         no loss where the input token is the end of document: that
//                         position would predict the next document's first token from the
//                         end of the previous one
//   reset_position_ids    positions restart at 0 after each end-of-document token
//   reset_attention_mask  a token attends only to tokens of its own document; the
//                         end-of-document token belongs to the document it ends
// and, for data with a loss mask (trainer/data/loss_mask.h), no loss where the target token
// is context.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/data/sample_source.h"

namespace kiln {

struct DocumentOptions {
  int32_t eod = -1;  // the tokenizer's end-of-document id
  bool eod_mask_loss = false;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
};

class TokenBatch {
 public:
  // Throws kiln::Error when an option needs an end-of-document id and options.eod < 0.
  explicit TokenBatch(const DocumentOptions& options);

  // Samples [first, first + rows) of data, seq_len + 1 tokens each.
  void fill(const SampleSource& data, int64_t first, int64_t rows, int seq_len);

  const int32_t* tokens() const { return tokens_.data(); }
  const int32_t* targets() const { return targets_.data(); }  // < 0: masked
  // The targets not masked: the tokens this batch trains on.
  int64_t trained_targets() const;
  // Per token, its position in its document; null unless reset_position_ids.
  const int32_t* positions() const;
  // Per token, the first column of its row it may attend to; null unless
  // reset_attention_mask.
  const int32_t* attention_starts() const;
  // The bytes of text the unmasked targets stand for (bytes_per_id: text_bytes_per_id).
  int64_t target_text_bytes(std::span<const int64_t> bytes_per_id) const;

 private:
  DocumentOptions options_;
  std::vector<int32_t> window_, mask_, tokens_, targets_, positions_, starts_;
};

}  // namespace kiln
