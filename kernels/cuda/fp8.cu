// FP8 cast-and-transpose and amax, the twins of kernels/cpu/fp8.cpp.
//
// fp8_cast_transpose: one 32 x 32 tile of x per block of 32 x 8 threads. Each thread casts
//   four values of the tile with CUDA's own conversion (round to nearest even, saturating:
//   what kernels/fp8_convert.h reproduces on the host), writes the codes in x's layout, and
//   leaves them in shared memory; after a barrier the block writes the tile transposed, so
//   both writes are coalesced. The amax rides along: magnitudes compared as their bit
//   patterns (for non-negative floats the order is the same, and a NaN's bits are above
//   infinity's, so a NaN wins as the CPU's does), reduced per warp and merged with atomicMax.
// fp8_current_scale: the same amax over a flat grid, then one thread turns it into the scale.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8.h"
#include "kernels/fp8_meta.h"
#include "kernels/fp8_scale.h"

namespace kiln::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;

__device__ uint8_t to_fp8(float v, Fp8Format format) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, format == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2);
}

__device__ unsigned magnitude_bits(float v) { return __float_as_uint(fabsf(v)); }

// The largest of each lane's bits across the warp, merged into *amax by lane 0.
__device__ void merge_amax(unsigned bits, float* amax) {
  for (int offset = 16; offset > 0; offset /= 2) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, offset));
  if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<unsigned*>(amax), bits);
}

template <typename T>
__global__ void cast_transpose_kernel(uint8_t* codes, uint8_t* codes_t, float* meta, const T* x, int64_t R,
                                      int64_t C, Fp8Format format) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const float scale = meta[kFp8Scale];
  const int64_t row0 = int64_t{blockIdx.y} * kTile, col0 = int64_t{blockIdx.x} * kTile;
  unsigned amax = 0;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const int64_t r = row0 + i, c = col0 + threadIdx.x;
    if (r < R && c < C) {
      const float v = static_cast<float>(x[r * C + c]);
      amax = max(amax, magnitude_bits(v));
      const uint8_t code = to_fp8(v * scale, format);
      if (codes) codes[r * C + c] = code;
      tile[i][threadIdx.x] = code;
    }
  }
  merge_amax(amax, &meta[kFp8Amax]);
  if (!codes_t) return;
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const int64_t c = col0 + i, r = row0 + threadIdx.x;  // codes_t[c, r] = tile[r, c]
    if (r < R && c < C) codes_t[c * R + r] = tile[threadIdx.x][i];
  }
}

template <typename T>
__global__ void amax_kernel(float* meta, const T* x, int64_t n) {
  unsigned amax = 0;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    amax = max(amax, magnitude_bits(static_cast<float>(x[i])));
  merge_amax(amax, &meta[kFp8Amax]);
}

__global__ void scale_kernel(float* meta, double fp8_max, int margin) {
  meta[kFp8Scale] = fp8_scale_from_amax(meta[kFp8Amax], fp8_max, margin, meta[kFp8Scale]);
  meta[kFp8ScaleInv] = 1.0f / meta[kFp8Scale];
}

}  // namespace

template <typename T>
void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, float* meta, const T* x, int64_t R, int64_t C,
                        Fp8Format format, cudaStream_t stream) {
  if (R == 0 || C == 0) return;
  const dim3 grid(static_cast<unsigned>((C + kTile - 1) / kTile), static_cast<unsigned>((R + kTile - 1) / kTile));
  cast_transpose_kernel<<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(codes, codes_t, meta, x, R, C, format);
  KILN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void fp8_current_scale(float* meta, const T* x, int64_t n, Fp8Format format, int margin, cudaStream_t stream) {
  KILN_CUDA_CHECK(cudaMemsetAsync(&meta[kFp8Amax], 0, sizeof(float), stream));
  if (n > 0) {
    const int64_t blocks = std::min<int64_t>((n + 255) / 256, 1024);
    amax_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(meta, x, n);
    KILN_CUDA_CHECK(cudaGetLastError());
  }
  scale_kernel<<<1, 1, 0, stream>>>(meta, fp8_max(format), margin);
  KILN_CUDA_CHECK(cudaGetLastError());
}

#define KILN_FP8_INSTANTIATE(T)                                                                               \
  template void fp8_cast_transpose<T>(uint8_t*, uint8_t*, float*, const T*, int64_t, int64_t, Fp8Format,      \
                                      cudaStream_t);                                                          \
  template void fp8_current_scale<T>(float*, const T*, int64_t, Fp8Format, int, cudaStream_t);
KILN_FP8_INSTANTIATE(float)
KILN_FP8_INSTANTIATE(__nv_bfloat16)
KILN_FP8_INSTANTIATE(__half)

}  // namespace kiln::cuda
