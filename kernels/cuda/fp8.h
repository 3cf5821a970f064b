// The FP8 casts and scales on the device (kernels/cuda/fp8.cu), twins of kernels/cpu/fp8.h,
// bit for bit: the same codes, the same amax, the same scale. meta is F32 [kFp8MetaSize]
// (kernels/fp8_meta.h). Each launches on `stream` and returns without waiting.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/fp8_convert.h"

namespace kiln::cuda {

// codes[R, C] and/or codes_t[C, R] (null: not wanted) = fp8(x * meta's scale), saturating;
// meta's amax = max(amax, max |x|), NaN once x holds one. T: float, __nv_bfloat16 or __half.
template <typename T>
void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, float* meta, const T* x, int64_t R, int64_t C,
                        Fp8Format format, cudaStream_t stream);
// meta's amax = max |x|, then its scale for `format` with 2^-margin headroom, and the inverse.
template <typename T>
void fp8_current_scale(float* meta, const T* x, int64_t n, Fp8Format format, int margin, cudaStream_t stream);

}  // namespace kiln::cuda
