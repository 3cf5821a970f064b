// The CPU bodies of the FP8 ops (kernels/ops.h): the reference the CUDA kernels
// (kernels/cuda/fp8.cu, fp8_matmul.cu) are held to, bit for bit for the casts.
#pragma once

#include <cstdint>

#include "kernels/fp8_convert.h"

namespace kiln::cpu {

// codes[R, C] and/or codes_t[C, R] (null: not wanted) = fp8(x * meta's scale); meta's amax
// = max(amax, max |x|), NaN once x holds one.
void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, float* meta, const float* x, int64_t R, int64_t C,
                        Fp8Format format);
// The largest magnitude among n values, NaN when one is NaN.
float fp8_amax(const float* x, int64_t n);
// meta's amax = max |x|, and its scale and inverse from that.
void fp8_current_scale(float* meta, const float* x, int64_t n, Fp8Format format, int margin);
// out[M, N] = (a[M, K] b[N, K]^T) * a_scale_inv * b_scale_inv (+ out when accumulate): the
// codes decoded to float (exactly), multiplied by the float gemm, whose sum is fp32 as
// cuBLASLt's is (in another order).
void fp8_matmul(float* out, const uint8_t* a, Fp8Format a_format, const float* a_meta, const uint8_t* b,
                Fp8Format b_format, const float* b_meta, int64_t M, int64_t N, int64_t K, bool accumulate);

}  // namespace kiln::cpu
