#include "kernels/cpu/fp8.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/fp8_meta.h"
#include "kernels/fp8_scale.h"

namespace kiln::cpu {

void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, float* meta, const float* x, int64_t R, int64_t C,
                        Fp8Format format) {
  const float scale = meta[kFp8Scale];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const uint8_t code = float_to_fp8(x[r * C + c] * scale, format);
      if (codes) codes[r * C + c] = code;
      if (codes_t) codes_t[c * R + r] = code;
    }
  const float amax = fp8_amax(x, R * C);
  if (std::isnan(amax) || amax > meta[kFp8Amax]) meta[kFp8Amax] = amax;
}

float fp8_amax(const float* x, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return NAN;
    amax = std::fmax(amax, std::fabs(x[i]));
  }
  return amax;
}

void fp8_current_scale(float* meta, const float* x, int64_t n, Fp8Format format, int margin) {
  meta[kFp8Amax] = fp8_amax(x, n);
  meta[kFp8Scale] = fp8_scale_from_amax(meta[kFp8Amax], fp8_max(format), margin, meta[kFp8Scale]);
  meta[kFp8ScaleInv] = 1.0f / meta[kFp8Scale];
}

void fp8_matmul(float* out, const uint8_t* a, Fp8Format a_format, const float* a_meta, const uint8_t* b,
                Fp8Format b_format, const float* b_meta, int64_t M, int64_t N, int64_t K, bool accumulate) {
  std::vector<float> da(static_cast<size_t>(M * K)), db(static_cast<size_t>(N * K));
  for (size_t i = 0; i < da.size(); ++i) da[i] = fp8_to_float(a[i], a_format);
  for (size_t i = 0; i < db.size(); ++i) db[i] = fp8_to_float(b[i], b_format);
  // Each product of two codes is exact in fp32 (at most 4 x 4 significant bits); the scales
  // apply once to the sum, as cuBLASLt's alpha does.
  gemm<float>(false, true, M, N, K, a_meta[kFp8ScaleInv] * b_meta[kFp8ScaleInv], da.data(), K, db.data(), K,
              accumulate ? 1.0f : 0.0f, out, N);
}

}  // namespace kiln::cpu
