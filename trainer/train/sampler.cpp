#include "trainer/train/sampler.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace kiln {

void check_sampling(const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    fail(fmt::format("--temperature must be 0 (greedy) or more, got {:g}", o.temperature));
  if (o.top_k < 0) fail(fmt::format("--top-k must be 0 (off) or more, got {}", o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1))
    fail(fmt::format("--top-p must be in (0, 1], got {:g}", o.top_p));
}

Sampler::Sampler(const SamplingOptions& options, uint64_t seed) : options_(options), rng_(seed) {
  check_sampling(options_);
}

const std::vector<Candidate>& Sampler::candidates(std::span<const float> logits) {
  KILN_CHECK(!logits.empty(), "sampler: no logits");
  candidates_.clear();
  const auto top = std::max_element(logits.begin(), logits.end());
  if (options_.temperature == 0) {
    // max_element returns the first of equal maxima: the lowest id.
    candidates_.push_back({static_cast<int32_t>(top - logits.begin()), 1.0});
    return candidates_;
  }
  // Relative to the largest logit, so the exponentials cannot overflow.
  for (size_t i = 0; i < logits.size(); ++i)
    candidates_.push_back(
        {static_cast<int32_t>(i),
         std::exp((static_cast<double>(logits[i]) - *top) / options_.temperature)});
  const auto more_likely = [](const Candidate& a, const Candidate& b) {
    return a.probability > b.probability || (a.probability == b.probability && a.id < b.id);
  };
  const size_t k = static_cast<size_t>(options_.top_k);
  if (k > 0 && k < candidates_.size()) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(k),
                      candidates_.end(), more_likely);
    candidates_.resize(k);
  } else if (options_.top_p < 1) {
    std::sort(candidates_.begin(), candidates_.end(), more_likely);
  }
  double total = 0;
  for (const Candidate& c : candidates_) total += c.probability;
  for (Candidate& c : candidates_) c.probability /= total;
  if (options_.top_p < 1) {
    // The smallest prefix whose probability reaches top_p: the token that crosses it stays.
    double mass = 0;
    size_t keep = 0;
    while (keep < candidates_.size() && mass < options_.top_p)
      mass += candidates_[keep++].probability;
    candidates_.resize(keep);
    for (Candidate& c : candidates_) c.probability /= mass;
  }
  return candidates_;
}

int32_t Sampler::next(std::span<const float> logits) {
  const std::vector<Candidate>& set = candidates(logits);
  if (options_.temperature == 0) return set.front().id;
  double pick = rng_.uniform();
  for (const Candidate& c : set) {
    if (pick < c.probability) return c.id;
    pick -= c.probability;
  }
  return set.back().id;  // what rounding leaves past the last candidate
}

}  // namespace kiln
