#include "trainer/data/token_batch.h"

#include <algorithm>

#include "base/check.h"

namespace kiln {

TokenBatch::TokenBatch(const DocumentOptions& options) : options_(options) {
  KILN_CHECK(options.eod >= 0 || !(options.eod_mask_loss || options.reset_position_ids ||
                                   options.reset_attention_mask),
             "data.eod_mask_loss, data.reset_position_ids and data.reset_attention_mask need a "
             "tokenizer with an end-of-document token");
}

void TokenBatch::fill(const SampleSource& data, int64_t first, int64_t rows, int seq_len) {
  const auto T = static_cast<size_t>(seq_len);
  const bool resets = options_.reset_position_ids || options_.reset_attention_mask;
  const bool masked = data.has_loss_mask();
  window_.resize(T + 1);
  mask_.resize(masked ? T + 1 : 0);
  tokens_.resize(static_cast<size_t>(rows) * T);
  targets_.resize(tokens_.size());
  positions_.resize(options_.reset_position_ids ? tokens_.size() : 0);
  starts_.resize(options_.reset_attention_mask ? tokens_.size() : 0);
  for (int64_t r = 0; r < rows; ++r) {
    data.sample(first + r, window_.data());
    if (masked) data.loss_mask(first + r, mask_.data());
    const size_t row = static_cast<size_t>(r) * T;
    int32_t document_start = 0;  // column where the current document began in this row
    for (size_t i = 0; i < T; ++i) {
      const int32_t input = window_[i];
      tokens_[row + i] = input;
      // The target is trained unless its token is context (the loss mask) or it follows an EOD.
      const bool context = (masked && mask_[i + 1] == 0) || (options_.eod_mask_loss && input == options_.eod);
      targets_[row + i] = context ? -1 : window_[i + 1];
      if (!resets) continue;
      const auto column = static_cast<int32_t>(i);
      if (options_.reset_position_ids) positions_[row + i] = column - document_start;
      if (options_.reset_attention_mask) starts_[row + i] = document_start;
      if (input == options_.eod) document_start = column + 1;
    }
  }
}

const int32_t* TokenBatch::positions() const {
  return options_.reset_position_ids ? positions_.data() : nullptr;
}

const int32_t* TokenBatch::attention_starts() const {
  return options_.reset_attention_mask ? starts_.data() : nullptr;
}

int64_t TokenBatch::trained_targets() const {
  return std::count_if(targets_.begin(), targets_.end(), [](int32_t target) { return target >= 0; });
}

int64_t TokenBatch::target_text_bytes(std::span<const int64_t> bytes_per_id) const {
  int64_t bytes = 0;
  for (int32_t target : targets_)
    if (target >= 0) bytes += bytes_per_id[static_cast<size_t>(target)];
  return bytes;
}

}  // namespace kiln
