#include "trainer/data/gpt_indices.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "base/check.h"

namespace kiln {
namespace {

// The final epoch is shuffled apart when fewer than this share of its samples are used.
constexpr double kSeparateFinalEpochBelow = 0.80;

void append_shuffled(std::vector<int32_t>& out, std::span<const int32_t> documents,
                     int64_t epochs, NumpyRandomState& rng) {
  const size_t begin = out.size();
  for (int64_t e = 0; e < epochs; ++e) out.insert(out.end(), documents.begin(), documents.end());
  rng.shuffle(std::span<int32_t>(out).subspan(begin));
}

void append_shuffled_range(std::vector<int64_t>& out, int64_t begin, int64_t end,
                           NumpyRandomState& rng) {
  const size_t at = out.size();
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  rng.shuffle(std::span<int64_t>(out).subspan(at));
}

}  // namespace

EpochPlan plan_epochs(int64_t tokens_per_epoch, int64_t num_samples, int seq_len) {
  KILN_CHECK(tokens_per_epoch > 0 && num_samples > 0 && seq_len > 0,
             "plan_epochs: tokens, samples and seq_len must be positive");
  EpochPlan plan;
  plan.tokens_per_epoch = tokens_per_epoch;
  // Each sample is seq_len tokens of the stream plus the one it shares with the next.
  const int64_t tokens_needed = num_samples * seq_len + 1;
  plan.num_epochs = (tokens_needed + tokens_per_epoch - 1) / tokens_per_epoch;
  if (plan.num_epochs > 1) {
    plan.samples_before_final_epoch = ((plan.num_epochs - 1) * tokens_per_epoch - 1) / seq_len;
    const int64_t from_final = num_samples - plan.samples_before_final_epoch;
    const int64_t per_epoch = (tokens_per_epoch - 1) / seq_len;
    plan.separate_final_epoch =
        from_final < static_cast<int64_t>(kSeparateFinalEpochBelow * static_cast<double>(per_epoch));
  }
  return plan;
}

std::vector<int32_t> build_document_index(std::span<const int32_t> documents,
                                          const EpochPlan& plan, NumpyRandomState& rng) {
  std::vector<int32_t> index;
  index.reserve(documents.size() * static_cast<size_t>(plan.num_epochs));
  if (!plan.separate_final_epoch) {
    append_shuffled(index, documents, plan.num_epochs, rng);
  } else {
    append_shuffled(index, documents, plan.num_epochs - 1, rng);
    append_shuffled(index, documents, 1, rng);
  }
  return index;
}

std::vector<int64_t> build_sample_index(std::span<const int64_t> document_sizes,
                                        std::span<const int32_t> document_index,
                                        const EpochPlan& plan, int seq_len) {
  const int64_t num_samples = (plan.num_epochs * plan.tokens_per_epoch - 1) / seq_len;
  std::vector<int64_t> index(static_cast<size_t>(2 * (num_samples + 1)));
  size_t at = 0;  // position in the document index
  int64_t offset = 0;  // token offset inside that document
  index[0] = index[1] = 0;
  for (int64_t k = 1; k <= num_samples; ++k) {
    // Walk seq_len tokens on: the window of sample k - 1 is its seq_len + 1 tokens, the
    // last of which is also the first of sample k.
    int64_t remaining = seq_len;
    while (true) {
      const int64_t left_in_document = document_sizes[static_cast<size_t>(document_index[at])] - offset;
      if (remaining < left_in_document) {
        offset += remaining;
        break;
      }
      remaining -= left_in_document;
      ++at;
      offset = 0;
    }
    index[static_cast<size_t>(2 * k)] = static_cast<int64_t>(at);
    index[static_cast<size_t>(2 * k + 1)] = offset;
  }
  return index;
}

std::vector<int64_t> build_shuffle_index(int64_t num_samples, const EpochPlan& plan,
                                         NumpyRandomState& rng) {
  std::vector<int64_t> index;
  index.reserve(static_cast<size_t>(num_samples));
  const int64_t first = plan.separate_final_epoch ? plan.samples_before_final_epoch : num_samples;
  append_shuffled_range(index, 0, first, rng);
  if (first < num_samples) append_shuffled_range(index, first, num_samples, rng);
  return index;
}

void build_blending_indices(std::span<const double> weights, int64_t size,
                            std::vector<int16_t>& dataset, std::vector<int64_t>& dataset_sample) {
  KILN_CHECK(!weights.empty() && weights.size() <= 32767,
             "blending: between 1 and 32767 datasets, got " + std::to_string(weights.size()));
  dataset.assign(static_cast<size_t>(size), 0);
  dataset_sample.assign(static_cast<size_t>(size), 0);
  std::vector<int64_t> taken(weights.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    // Megatron's error term: how far each dataset is behind its share after i samples
    // (at least one, so the first pick follows the weights too). Ties go to the first.
    const double so_far = std::max(static_cast<double>(i), 1.0);
    size_t pick = 0;
    double worst = weights[0] * so_far - static_cast<double>(taken[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double behind = weights[d] * so_far - static_cast<double>(taken[d]);
      if (behind > worst) {
        worst = behind;
        pick = d;
      }
    }
    dataset[static_cast<size_t>(i)] = static_cast<int16_t>(pick);
    dataset_sample[static_cast<size_t>(i)] = taken[pick]++;
  }
}

}  // namespace kiln
