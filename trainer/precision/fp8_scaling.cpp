#include "trainer/precision/fp8_scaling.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/fp8_scale.h"

namespace kiln {

Fp8Scale::Fp8Scale(Fp8Format format, const Fp8Recipe& recipe) : format_(format), recipe_(recipe) {
  KILN_CHECK(recipe.scaling == "delayed" || recipe.scaling == "current",
             "fp8 scaling must be delayed or current, got \"" + recipe.scaling + "\"");
  KILN_CHECK(recipe.amax_compute == "max" || recipe.amax_compute == "most_recent",
             "fp8 amax_compute must be max or most_recent, got \"" + recipe.amax_compute + "\"");
  KILN_CHECK(recipe.history >= 1, "fp8 amax history must be >= 1 step, got " + std::to_string(recipe.history));
  KILN_CHECK(recipe.margin >= 0 && recipe.margin <= 30,
             "fp8 margin must be between 0 and 30, got " + std::to_string(recipe.margin));
}

void Fp8Scale::scale_for(float amax) { scale_ = fp8_scale_from_amax(amax, fp8_max(format_), recipe_.margin, scale_); }

Fp8Tensor Fp8Scale::quantize(const float* x, int64_t n) {
  const float amax = amax_of(x, n);
  if (recipe_.scaling == "current") scale_for(amax);
  record(amax);
  Fp8Tensor t;
  t.format = format_;
  t.scale_inv = 1.0f / scale_;
  t.codes.resize(static_cast<size_t>(n));
  const double largest = fp8_max(format_);
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = x[i] * scale_;
    if (std::fabs(scaled) > largest) ++t.saturated;
    t.codes[static_cast<size_t>(i)] = float_to_fp8(scaled, format_);
  }
  return t;
}

void Fp8Scale::record(float amax) {
  if (std::isfinite(amax)) {
    pending_amax_ = pending_ ? std::max(pending_amax_, amax) : amax;
    pending_ = true;
  } else {
    ++non_finite_;
  }
}

void Fp8Scale::update() {
  if (recipe_.scaling != "delayed" || !pending_) return;
  if (history_.size() < static_cast<size_t>(recipe_.history)) {
    history_.push_back(pending_amax_);
  } else {
    history_[next_] = pending_amax_;
  }
  const float latest = pending_amax_;
  next_ = (next_ + 1) % static_cast<size_t>(recipe_.history);
  pending_ = false;
  scale_for(recipe_.amax_compute == "max" ? *std::max_element(history_.begin(), history_.end()) : latest);
}

float amax_of(const float* x, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    amax = std::max(amax, std::fabs(x[i]));
  }
  return amax;
}

std::vector<float> dequantize(const Fp8Tensor& t) {
  std::vector<float> values(t.codes.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = fp8_to_float(t.codes[i], t.format) * t.scale_inv;
  return values;
}

std::vector<float> fp8_matmul_nt(const Fp8Tensor& a, const Fp8Tensor& b, int64_t m, int64_t n, int64_t k) {
  KILN_CHECK(static_cast<int64_t>(a.codes.size()) == m * k && static_cast<int64_t>(b.codes.size()) == n * k,
             "fp8_matmul_nt: operands are not [m, k] and [n, k]");
  KILN_CHECK(!(a.format == Fp8Format::E5M2 && b.format == Fp8Format::E5M2),
             "fp8_matmul_nt: cuBLASLt multiplies no two E5M2 operands");
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += static_cast<double>(fp8_to_float(a.codes[static_cast<size_t>(i * k + p)], a.format)) *
               fp8_to_float(b.codes[static_cast<size_t>(j * k + p)], b.format);
      out[static_cast<size_t>(i * n + j)] = static_cast<float>(sum * a.scale_inv * b.scale_inv);
    }
  return out;
}

}  // namespace kiln
