// FP8 to and from float on the host, bit-exact with CUDA's conversions (cuda_fp8.h's
// __nv_cvt_float_to_fp8 with __NV_SATFINITE: round to nearest even, values beyond the
// largest finite one saturate to it), for the CPU reference of FP8 training.
//  - E4M3 (forward: weights, activations): 4 exponent bits (bias 7), 3 mantissa bits, no
//    infinity, NaN as S.1111.111; largest 448, smallest normal 2^-6, subnormal step 2^-9.
//  - E5M2 (gradients): 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like infinities and
//    NaNs; largest finite 57344, smallest normal 2^-14, subnormal step 2^-16.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kiln {

enum class Fp8Format { E4M3, E5M2 };

struct Fp8Layout {
  int mantissa_bits;
  int bias;
  double max_finite;
  uint8_t max_code;  // of max_finite
};

constexpr Fp8Layout fp8_layout(Fp8Format format) {
  return format == Fp8Format::E4M3 ? Fp8Layout{3, 7, 448.0, 0x7E} : Fp8Layout{2, 15, 57344.0, 0x7B};
}

inline double fp8_max(Fp8Format format) { return fp8_layout(format).max_finite; }

inline float fp8_to_float(uint8_t bits, Fp8Format format) {
  const Fp8Layout f = fp8_layout(format);
  const int exponent_bits = 7 - f.mantissa_bits;
  const double sign = (bits & 0x80) != 0 ? -1.0 : 1.0;
  const int exponent = (bits >> f.mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
  const int all_ones = (1 << exponent_bits) - 1;
  if (format == Fp8Format::E4M3 && exponent == all_ones && mantissa == (1 << f.mantissa_bits) - 1)
    return std::nanf("");
  if (format == Fp8Format::E5M2 && exponent == all_ones)
    return mantissa == 0 ? static_cast<float>(sign * INFINITY) : std::nanf("");
  const double fraction = static_cast<double>(mantissa) / (1 << f.mantissa_bits);
  // Subnormals (exponent 0) have no leading one and the smallest normal's exponent.
  const double value = exponent == 0 ? std::ldexp(fraction, 1 - f.bias) : std::ldexp(1.0 + fraction, exponent - f.bias);
  return static_cast<float>(sign * value);
}

inline uint8_t float_to_fp8(float x, Fp8Format format) {
  const Fp8Layout f = fp8_layout(format);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return 0x7F;  // CUDA's NaN in both formats, whatever the sign
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(x)) return sign | f.max_code;
  // The quantum at a's binade, or the subnormal step below the smallest normal; rounding
  // to nearest even there (nearbyint's default mode) gives the fp8 value.
  const int min_exponent = 1 - f.bias;
  const int exponent = a == 0 ? min_exponent : std::max(std::ilogb(a), min_exponent);
  const double quantum = std::ldexp(1.0, exponent - f.mantissa_bits);
  const double rounded = std::nearbyint(a / quantum) * quantum;
  if (rounded > f.max_finite) return sign | f.max_code;
  if (rounded < std::ldexp(1.0, min_exponent))  // subnormal (or zero): exponent field 0
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(rounded / std::ldexp(1.0, min_exponent - f.mantissa_bits)));
  const int e = std::ilogb(rounded);
  const int mantissa = static_cast<int>(std::ldexp(rounded, f.mantissa_bits - e)) - (1 << f.mantissa_bits);
  return static_cast<uint8_t>(sign | ((e + f.bias) << f.mantissa_bits) | mantissa);
}

}  // namespace kiln
