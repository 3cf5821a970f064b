#include "trainer/data/document_samples.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"
#include "trainer/data/gpt_dataset.h"
#include "trainer/data/loss_mask.h"
#include "trainer/data/numpy_random.h"

namespace kiln {

DocumentSamples::DocumentSamples(const DocumentSamplesSpec& spec)
    : spec_(spec), data_(spec.prefix), mask_(open_loss_mask(data_)) {
  const char* split = split_name(spec.which);
  KILN_CHECK(spec.seq_len >= 1, "data: seq_len must be at least 1, got " + std::to_string(spec.seq_len));
  const std::vector<int64_t> bounds = split_boundaries(spec.split, data_.num_documents());
  first_document_ = bounds[static_cast<size_t>(spec.which)];
  last_document_ = bounds[static_cast<size_t>(spec.which) + 1];
  if (last_document_ <= first_document_)
    fail(std::string("data: the ") + split + " split of " + spec.prefix + " holds no documents (data.split=\"" +
         spec.split + "\")");
  num_tokens_ = data_.document_tokens(last_document_ - 1).second - data_.document_tokens(first_document_).first;
  max_token_id_ = std::max(spec.pad, data_.max_token(data_.document_tokens(first_document_).first, num_tokens_,
                                                     std::string("the ") + split + " split of " + spec.prefix));
  const int64_t window = int64_t{spec.seq_len} + 1;
  const auto documents = static_cast<size_t>(last_document_ - first_document_);
  std::vector<int32_t> epoch(documents);
  samples_.push_back(0);
  while (epochs_ == 0 || num_samples() < spec.num_samples) {
    std::iota(epoch.begin(), epoch.end(), static_cast<int32_t>(first_document_));
    NumpyRandomState((uint64_t{spec.seed} + static_cast<uint64_t>(epochs_)) % (uint64_t{1} << 32))
        .shuffle(std::span<int32_t>(epoch));
    int64_t used = 0;  // tokens in the open sample
    for (const int32_t d : epoch) {
      const auto [begin, end] = data_.document_tokens(d);
      const int64_t length = std::min(end - begin, window);
      if (epochs_ == 0 && end - begin > window) ++cut_documents_;
      if (used > 0 && (!spec.pack || used + length > window)) {
        samples_.push_back(static_cast<int64_t>(order_.size()));
        used = 0;
      }
      order_.push_back(d);
      used += length;
    }
    samples_.push_back(static_cast<int64_t>(order_.size()));
    ++epochs_;
    if (spec.num_samples == 0) break;
  }
}

template <typename Document, typename Pad>
void DocumentSamples::fill(int64_t index, Document&& document, Pad&& pad) const {
  KILN_CHECK(index >= 0 && index < num_samples(), "data: sample " + std::to_string(index) + " of " +
                                                      split_name(spec_.which) + " is outside its " +
                                                      std::to_string(num_samples()));
  int64_t left = int64_t{spec_.seq_len} + 1, at = 0;
  for (int64_t k = samples_[static_cast<size_t>(index)]; k < samples_[static_cast<size_t>(index) + 1]; ++k) {
    const auto [begin, end] = data_.document_tokens(order_[static_cast<size_t>(k)]);
    const int64_t n = std::min(end - begin, left);
    document(begin, n, at);
    at += n;
    left -= n;
  }
  pad(at, left);
}

void DocumentSamples::sample(int64_t index, int32_t* out) const {
  fill(
      index, [&](int64_t begin, int64_t n, int64_t at) { data_.read(begin, n, out + at); },
      [&](int64_t at, int64_t n) { std::fill(out + at, out + at + n, spec_.pad); });
}

void DocumentSamples::loss_mask(int64_t index, int32_t* out) const {
  fill(
      index,
      [&](int64_t begin, int64_t n, int64_t at) {
        if (mask_) {
          mask_->read(begin, n, out + at);
        } else {
          std::fill(out + at, out + at + n, 1);
        }
      },
      [&](int64_t at, int64_t n) { std::fill(out + at, out + at + n, 0); });
}

std::string DocumentSamples::describe() const {
  return spec_.prefix + " " + split_name(spec_.which) + ": " + std::to_string(last_document_ - first_document_) +
         " documents, " + std::to_string(num_tokens_) + " tokens, " + std::to_string(num_samples()) + " " +
         (spec_.pack ? "packed" : "padded") + " samples over " + std::to_string(epochs_) +
         (epochs_ == 1 ? " epoch" : " epochs") +
         (cut_documents_ > 0 ? ", " + std::to_string(cut_documents_) + " documents cut to seq_len + 1" : "") +
         (mask_ ? ", loss mask" : "");
}

}  // namespace kiln
