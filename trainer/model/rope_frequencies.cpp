#include "trainer/model/rope_frequencies.h"

#include <cmath>
#include <numbers>

namespace kiln {

std::vector<double> rope_inverse_frequencies(const ModelConfig& m) {
  const int d = m.rope_dim();
  std::vector<double> inv_freq(static_cast<size_t>(d / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(m.rope_theta, -2.0 * static_cast<double>(i) / d);
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
