#include "trainer/model/rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kiln {

namespace {

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// The dim (of d) that turns `rotations` times over the original context.
double yarn_correction_dim(double rotations, int d, const ModelConfig& m) {
  return d * std::log(m.rope_original_seq_len / (rotations * 2 * std::numbers::pi)) / (2 * std::log(m.rope_theta));
}

void yarn(const ModelConfig& m, int d, std::vector<double>& inv_freq) {
  const double low = std::max(std::floor(yarn_correction_dim(m.rope_beta_fast, d, m)), 0.0);
  double high = std::min(std::ceil(yarn_correction_dim(m.rope_beta_slow, d, m)), d - 1.0);
  if (high == low) high += 0.001;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    // 1 where the dim is kept (extrapolated), 0 where it is interpolated.
    const double kept = 1.0 - std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    inv_freq[i] = inv_freq[i] / m.rope_scaling_factor * (1 - kept) + inv_freq[i] * kept;
  }
}

}  // namespace

double rope_attention_factor(const ModelConfig& m) {
  if (m.rope_scaling != "yarn") return 1.0;
  const double s = m.rope_scaling_factor;
  if (m.rope_mscale > 0 && m.rope_mscale_all_dim > 0)
    return yarn_mscale(s, m.rope_mscale) / yarn_mscale(s, m.rope_mscale_all_dim);
  return yarn_mscale(s, 1.0);
}

double latent_softmax_factor(const ModelConfig& m) {
  if (m.rope_scaling != "yarn" || m.rope_mscale_all_dim <= 0) return 1.0;
  const double mscale = yarn_mscale(m.rope_scaling_factor, m.rope_mscale_all_dim);
  return mscale * mscale;
}

std::vector<double> rope_inverse_frequencies(const ModelConfig& m) {
  const int d = m.rope_dim();
  std::vector<double> inv_freq(static_cast<size_t>(d / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(m.rope_theta, -2.0 * static_cast<double>(i) / d);
  if (m.rope_scaling == "yarn") yarn(m, d, inv_freq);
  if (m.rope_scaling != "llama3") return inv_freq;
  const double original = m.rope_original_seq_len, factor = m.rope_scaling_factor;
  const double low = m.rope_low_freq_factor, high = m.rope_high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelength = 2 * std::numbers::pi / f;
    if (wavelength > original / low) {
      f /= factor;
    } else if (wavelength >= original / high) {
      const double smooth = (original / wavelength - low) / (high - low);
      f = (1 - smooth) * f / factor + smooth * f;
    }
  }
  return inv_freq;
}

}  // namespace kiln
