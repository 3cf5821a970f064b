// exp, tanh and sigmoid that the compiler can vectorize. std::exp and std::tanh on
// float are library calls that run one value at a time; these are branch-free
// polynomials that turn into AVX code inside a loop. For float they are accurate to a
// couple of ulp (Cephes' range reduction and minimax polynomial for expf); for double
// (the gradient-check path) they call the standard library.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln::cpu {

inline float vexp(float x) {
  // exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln(2) / 2.
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // floor() by truncating a positive number: std::floor does not vectorize without
  // -fno-trapping-math, and x / ln 2 + 0.5 + 128 > 0 after the clamp.
  const int32_t ni = static_cast<int32_t>(x * 1.44269504088896341f + 128.5f) - 128;
  const float n = static_cast<float>(ni);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t bits = (ni + 127) << 23;
  return e * std::bit_cast<float>(bits);
}
inline double vexp(double x) { return std::exp(x); }

inline float vtanh(float x) { return 1.0f - 2.0f / (vexp(2.0f * x) + 1.0f); }
inline double vtanh(double x) { return std::tanh(x); }

template <typename T>
T vsigmoid(T x) {
  return T(1) / (T(1) + vexp(-x));
}

}  // namespace kiln::cpu
