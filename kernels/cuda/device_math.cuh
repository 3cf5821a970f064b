// Device helpers shared by the elementwise, embedding, norm, activation, RoPE, loss and
// optimizer kernels: T <-> float conversion, 16-byte packs, warp and block reductions,
// launch sizing and the deterministic column-sum kernel behind every bias and norm-weight
// gradient.
//
// Packs: a kernel templated on P reads and writes P consecutive elements at a time
// (P = kPack<T> gives one 16-byte access for T, 8 for bf16/fp16, 4 for float). The host
// picks P = kPack<T> when the row width is a multiple of it and every pointer is aligned
// to its pack (can_pack), and P = 1 otherwise, so odd shapes and offset views still work.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"

namespace kiln::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// ---- conversions (float -> T rounds to nearest even) -----------------------------------

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    static_assert(std::is_same_v<T, __half>, "float, bf16 or fp16");
    return __float2half_rn(x);
  }
}

// ---- packs ------------------------------------------------------------------------------

template <typename T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <typename T, int P>
struct alignas(sizeof(T) * P) Pack {
  T v[P];
};

// out[k] = float(p[k]) for k < P; p must be aligned to P elements.
template <int P, typename T>
__device__ __forceinline__ void load_float(float (&out)[P], const T* p) {
  const Pack<T, P> x = *reinterpret_cast<const Pack<T, P>*>(p);
#pragma unroll
  for (int k = 0; k < P; ++k) out[k] = to_float(x.v[k]);
}

// p[k] = T(in[k]) for k < P; p must be aligned to P elements.
template <int P, typename T>
__device__ __forceinline__ void store_float(T* p, const float (&in)[P]) {
  Pack<T, P> x;
#pragma unroll
  for (int k = 0; k < P; ++k) x.v[k] = from_float<T>(in[k]);
  *reinterpret_cast<Pack<T, P>*>(p) = x;
}

// True when width is a multiple of P and every pointer is aligned to a P-element pack of
// its own type (null pointers pass).
template <int P, typename... Ts>
bool can_pack(int64_t width, const Ts*... ptrs) {
  return width % P == 0 && ((reinterpret_cast<uintptr_t>(ptrs) % (P * sizeof(Ts)) == 0) && ...);
}

// Calls launch(std::integral_constant<int, P>{}) with P = kPack<T> when packed, else 1.
template <typename T, typename Launch>
void with_pack(bool packed, Launch&& launch) {
  if (packed) {
    launch(std::integral_constant<int, kPack<T>>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

// ---- positions ------------------------------------------------------------------------

// The position of token n = b * seq + t: positions[n] (the ops' optional per-token
// positions), or t when there are none.
__device__ __forceinline__ int64_t position_of(const int32_t* positions, int64_t n, int64_t seq) {
  return positions ? positions[n] : n % seq;
}

// ---- a warp per row ---------------------------------------------------------------------

// The row of the calling warp when each block of blockDim.x threads holds blockDim.x / 32
// warps, a row each.
__device__ __forceinline__ int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
}

// ---- reductions (blockDim.x a multiple of 32; every lane/thread gets the same bits) -----

template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Sum over the block, in a fixed order (lanes by xor shuffle, then warps by index).
template <typename V>
__device__ V block_sum(V v) {
  __shared__ V warp_totals[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // a previous call may still be reading warp_totals
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  return warp_sum(lane < static_cast<int>(blockDim.x / 32) ? warp_totals[lane] : V(0));
}

// ---- launch sizing ------------------------------------------------------------------------

// Blocks for `work` items at `per_block` items each, at least 1, at most `cap` (the kernels
// that take a capped grid loop with a grid stride).
inline unsigned blocks_for(int64_t work, int64_t per_block, int64_t cap = int64_t{1} << 30) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + per_block - 1) / per_block, 1, cap));
}

// ---- flat elementwise map -----------------------------------------------------------------

// Applies op.apply<P>(i) to the packs i = 0, P, 2P, ... below n, then op.apply<1>(i) to the
// tail. Grid-stride, 256 threads; one thread owns whole packs, so out may alias an input.
constexpr int kMapThreads = 256;

template <int P, typename Op>
__global__ void __launch_bounds__(kMapThreads) map_kernel(int64_t n, Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kMapThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kMapThreads + threadIdx.x;
  const int64_t packs = n / P;
  for (int64_t i = first; i < packs; i += stride) op.template apply<P>(i * P);
  for (int64_t i = packs * P + first; i < n; i += stride) op.template apply<1>(i);
}

template <int P, typename Op>
void launch_map(int64_t n, const Op& op, cudaStream_t stream) {
  if (n <= 0) return;
  map_kernel<P><<<blocks_for(n / P + 1, kMapThreads, 1 << 16), kMapThreads, 0, stream>>>(n, op);
  KILN_CUDA_CHECK_LAUNCH("map_kernel");
}

// ---- deterministic column sums --------------------------------------------------------------

// out_k[c] += sum over rows n < N of term_k(n, c), k < K (K = 1 or 2): the bias and norm
// parameter gradients, with no atomics, so the bits never depend on timing.
//
// Decomposition: one block of 1024 threads per 16 columns. 16 / P threads read the 16
// columns of one row (P-element packs; 32 bytes per row for bf16, 64 for float) and the
// 1024 / (16 / P) row slots walk rows slot, slot + slots, ... accumulating in registers.
// The slots are then folded in a fixed order: xor shuffles inside each warp, then the 32
// warp sums in warp order through shared memory. Needs P | C (the column packs never
// straddle C). Term: `template <int P, int K> __device__ void operator()(int64_t n,
// int64_t c, float (&acc)[K][P]) const` adds row n, columns [c, c + P) into acc.
constexpr int kColumnBlock = 16;
constexpr int kColumnThreads = 1024;

template <int P, int K, typename Term>
__global__ void __launch_bounds__(kColumnThreads)
    column_sums_kernel(float* out0, float* out1, int64_t N, int64_t C, Term term) {
  constexpr int kLanes = kColumnBlock / P;  // threads per row
  constexpr int kSlots = kColumnThreads / kLanes;
  static_assert(kColumnBlock % P == 0 && 32 % kLanes == 0);
  __shared__ float warp_sums[K][kColumnThreads / 32][kColumnBlock];

  const int lane = threadIdx.x % kLanes, slot = threadIdx.x / kLanes, warp = threadIdx.x / 32;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnBlock + lane * P;
  float acc[K][P] = {};
  if (c < C) {
#pragma unroll 4
    for (int64_t n = slot; n < N; n += kSlots) term(n, c, acc);
  }
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int offset = 16; offset >= kLanes; offset >>= 1)
        acc[k][p] += __shfl_xor_sync(kFullMask, acc[k][p], offset);
  if (threadIdx.x % 32 < kLanes) {
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int p = 0; p < P; ++p) warp_sums[k][warp][lane * P + p] = acc[k][p];
  }
  __syncthreads();
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColumnBlock + threadIdx.x;
  if (threadIdx.x < kColumnBlock && col < C) {
    float total[K] = {};
    for (int w = 0; w < kColumnThreads / 32; ++w)
#pragma unroll
      for (int k = 0; k < K; ++k) total[k] += warp_sums[k][w][threadIdx.x];
    out0[col] += total[0];
    if constexpr (K == 2) out1[col] += total[1];
  }
}

template <int P, int K, typename Term>
void launch_column_sums(float* out0, float* out1, int64_t N, int64_t C, const Term& term,
                        cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  column_sums_kernel<P, K>
      <<<blocks_for(C, kColumnBlock), kColumnThreads, 0, stream>>>(out0, out1, N, C, term);
  KILN_CUDA_CHECK_LAUNCH("column_sums_kernel");
}

}  // namespace kiln::cuda
