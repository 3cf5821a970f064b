// The random numbers parameters start from, the same bits on the host and on a device.
// Counter-based: the i-th number of stream s under seed k is a pure function of (k, s, i), so
// any thread, kernel or rank draws any element without the ones before it, and a
// tensor-parallel piece of a parameter draws exactly what the whole parameter holds there.
//
//  - Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
//    counter (i, s), key k; 52 of its 128 bits give a uniform in (0, 1).
//  - The standard normal by inversion of its distribution function: Wichura's AS 241
//    (Applied Statistics 37, 1988), three rational approximations accurate to about 1e-16,
//    whose tails take sqrt(-log p) with the logarithm below.
//
// Bit for bit on both sides: integer arithmetic, and IEEE-754 double +, -, *, / and sqrt,
// which every conforming host and CUDA device rounds correctly, with each multiply-add fused
// explicitly (std::fma, __fma_rn). No product feeds an addition or subtraction directly (but
// the uniform's scaling by 2^-53, which is exact, so that fused or not it gives the same), so
// no compiler can contract one into a fused operation the other side would not make (gcc's
// -ffp-contract, nvcc's -fmad; the bodies are built without contraction all the same); and no
// library log, exp or cos, whose last bits differ between glibc and CUDA.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace kiln {

// Where a fill draws: `rows` runs of `cols` elements; element c of run r is x[r * stride + c]
// of the filled tensor and draws index first + r * stream_stride + c of the stream.
struct RandomRuns {
  int64_t rows = 1, cols = 0, stride = 0, first = 0, stream_stride = 0;

  KILN_HOST_DEVICE int64_t count() const { return rows * cols; }
  // Element e of the runs, in order: its place in x and its index in the stream.
  KILN_HOST_DEVICE int64_t offset(int64_t e) const { return e / cols * stride + e % cols; }
  KILN_HOST_DEVICE uint64_t index(int64_t e) const {
    return static_cast<uint64_t>(first + e / cols * stream_stride + e % cols);
  }
};

namespace exact {
#ifdef __CUDA_ARCH__
__device__ inline double fma(double a, double b, double c) { return __fma_rn(a, b, c); }
__device__ inline double div(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline double sqrt(double x) { return __dsqrt_rn(x); }
__device__ inline uint64_t bits(double x) { return static_cast<uint64_t>(__double_as_longlong(x)); }
__device__ inline double from_bits(uint64_t b) { return __longlong_as_double(static_cast<long long>(b)); }
#else
inline double fma(double a, double b, double c) { return std::fma(a, b, c); }
inline double div(double a, double b) { return a / b; }
inline double sqrt(double x) { return std::sqrt(x); }
inline uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }
inline double from_bits(uint64_t b) { return std::bit_cast<double>(b); }
#endif
}  // namespace exact

struct Philox4x32 {
  uint32_t v[4];
};

// Philox4x32-10 of `counter` under the key (k0, k1).
KILN_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = 0xD2511F53ull * c.v[0], p1 = 0xCD9E8D57ull * c.v[2];
    c = {{static_cast<uint32_t>(p1 >> 32) ^ c.v[1] ^ k0, static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ c.v[3] ^ k1, static_cast<uint32_t>(p0)}};
  }
  return c;
}

// Number i of stream s under seed k, uniform over the odd multiples of 2^-53 in (0, 1): never
// 0 or 1, and u and 1 - u equally likely, so the normals below are exactly symmetric.
KILN_HOST_DEVICE inline double counter_uniform(uint64_t seed, uint64_t stream, uint64_t i) {
  const Philox4x32 r = philox4x32_10(
      {{static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32), static_cast<uint32_t>(stream),
        static_cast<uint32_t>(stream >> 32)}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits52 = (static_cast<uint64_t>(r.v[1]) << 32 | r.v[0]) >> 12;
  return static_cast<double>(2 * bits52 + 1) * 0x1p-53;
}

// The natural logarithm of a positive normal double, within 1 ulp (counter_random_test.cpp),
// as fdlibm's: x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)), and log(1 + f) = 2 atanh(s) =
// f - (f^2/2 - s (f^2/2 + R)), s = f / (2 + f), R = 2/3 s^2 + 2/5 s^4 + ... to s^20 (|s| < 0.172:
// the first term left out is below 1e-18 of the sum), the exact f carrying the bulk.
KILN_HOST_DEVICE inline double counter_log(double x) {
  uint64_t b = exact::bits(x);
  double e = static_cast<double>(static_cast<int64_t>(b >> 52) - 1023);
  b = (b & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;  // 1 + f in [1, 2)
  if (b > 0x3FF6A09E667F3BCCull) {                          // 1 + f >= sqrt(2): halve it
    b -= 1ull << 52;
    e += 1;
  }
  const double f = exact::from_bits(b) - 1.0, half_f = 0.5 * f;
  const double s = exact::div(f, 2.0 + f), z = s * s;
  double series = 2.0 / 21;
  for (int k = 19; k >= 3; k -= 2) series = exact::fma(series, z, 2.0 / k);
  const double r = z * series;
  // ln 2 = ln2_hi + ln2_lo, e * ln2_hi exact; the small terms first.
  const double small = exact::fma(s, exact::fma(half_f, f, r), e * 0x1.ef35793c7673p-45);
  return exact::fma(e, 0x1.62e42fefa38p-1, f - exact::fma(half_f, f, -small));
}

// c[0] + c[1] x + ... + c[7] x^7.
KILN_HOST_DEVICE inline double polynomial7(const double (&c)[8], double x) {
  double sum = c[7];
  for (int k = 6; k >= 0; --k) sum = exact::fma(sum, x, c[k]);
  return sum;
}

// The standard normal's quantile at p in (0, 1): AS 241 (PPND16).
KILN_HOST_DEVICE inline double normal_quantile(double p) {
  constexpr double a[8] = {3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3,
                           1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
                           3.3430575583588128105e4, 2.5090809287301226727e3};
  constexpr double b[8] = {1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
                           2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
                           5.2264952788528545610e3};
  constexpr double c[8] = {1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
                           3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
                           2.27238449892691845833e-2, 7.74545014278341407640e-4};
  constexpr double d[8] = {1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
                           1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
                           1.05075007164441684324e-9};
  constexpr double e[8] = {6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
                           2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
                           2.71155556874348757815e-5, 2.01033439929228813265e-7};
  constexpr double f[8] = {1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
                           7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
                           2.04426310338993978564e-15};
  const double q = p - 0.5;
  if (q >= -0.425 && q <= 0.425) {
    const double r = exact::fma(-q, q, 0.180625);
    return q * exact::div(polynomial7(a, r), polynomial7(b, r));
  }
  const double r = exact::sqrt(-counter_log(q < 0 ? p : 1.0 - p));
  const double x = r <= 5.0 ? exact::div(polynomial7(c, r - 1.6), polynomial7(d, r - 1.6))
                            : exact::div(polynomial7(e, r - 5.0), polynomial7(f, r - 5.0));
  return q < 0 ? -x : x;
}

// Number i of stream s under seed k, standard normal.
KILN_HOST_DEVICE inline double counter_normal(uint64_t seed, uint64_t stream, uint64_t i) {
  return normal_quantile(counter_uniform(seed, stream, i));
}

}  // namespace kiln
