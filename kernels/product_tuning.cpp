#include "kernels/product_tuning.h"

#include <chrono>
#include <cmath>

#include <fmt/core.h>

namespace kiln {

size_t ProductKeyHash::operator()(const ProductKey& key) const {
  size_t h = 0;
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  mix(static_cast<uint64_t>(key.device));
  mix(static_cast<uint64_t>(key.a_b_type));
  mix(static_cast<uint64_t>(key.c_type));
  mix((key.transpose_a ? 1u : 0u) | (key.transpose_b ? 2u : 0u));
  for (int64_t v : {key.M, key.N, key.K, key.lda, key.ldb, key.ldc, key.aux_ld})
    mix(static_cast<uint64_t>(v));
  mix(static_cast<uint64_t>(key.epilogue));
  mix((uint64_t{key.align_a} << 48) | (uint64_t{key.align_b} << 32) |
      (uint64_t{key.align_c} << 16) | key.align_bias);
  mix(key.align_aux);
  return h;
}

int fastest_candidate(const std::vector<double>& seconds) {
  int best = -1;
  for (size_t i = 0; i < seconds.size(); ++i) {
    const double s = seconds[i];
    if (s < 0 || !std::isfinite(s)) continue;
    if (best < 0 || s < seconds[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  return best;
}

ProductTuner::ProductTuner(Clock clock) : clock_(std::move(clock)) {}

double ProductTuner::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int ProductTuner::choose(int candidates, const Measure& measure) {
  if (!enabled_ || candidates < 2) return 0;
  const double start = clock_();
  std::vector<double> seconds;
  for (int i = 0; i < candidates && i < kCandidates; ++i) seconds.push_back(measure(i));
  seconds_ += clock_() - start;
  ++tuned_;
  const int best = fastest_candidate(seconds);
  return best < 0 ? 0 : best;
}

std::string ProductTuner::summary(const std::string& library) const {
  std::string text;
  if (tuned_ > 0)
    text = fmt::format("{} shape{} tuned in {:.2f} s (each the fastest of up to {} {} "
                       "candidates)",
                       tuned_, tuned_ == 1 ? "" : "s", seconds_, kCandidates, library);
  if (unfused_ > 0)
    text += fmt::format("{}{} product{} without a fused {} kernel ran {} bias, GELU or bias "
                        "gradient as separate kernels",
                        text.empty() ? "" : "; ", unfused_, unfused_ == 1 ? "" : "s", library,
                        unfused_ == 1 ? "its" : "their");
  return text;
}

}  // namespace kiln
