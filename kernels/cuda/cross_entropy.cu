// Softmax cross-entropy over the first V columns of logits[N, Vp] (the rest is padding): the
// twin of kernels/cpu/cross_entropy.cpp. Forward keeps only the log-sum-exp of each row;
// backward recomputes the probabilities from it and may write over the logits.
//
// Forward: one block of 512 threads per row. Each thread walks its packs of the row once,
//   keeping an online (max, sum of exp(x - max)) pair; the pairs are merged with xor shuffles
//   inside each warp, then warp by warp in warp 0, in a fixed order. loss = lse - x[target],
//   0 for a masked target (< 0).
// Backward: one block of 512 threads per row: dlogits = dloss * (exp(x - lse) - onehot) over
//   the first V columns, 0 on the padding and on masked rows. Each thread reads a pack before
//   writing it, so dlogits may alias logits.
#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kLossThreads = 512;
constexpr int kLossWarps = kLossThreads / 32;

// (m, s) <- the merge of two online-softmax states; an empty state is (-inf, 0).
__device__ __forceinline__ void merge(float& m, float& s, float other_m, float other_s) {
  const float top = fmaxf(m, other_m);
  if (top == -INFINITY) return;  // both empty
  s = s * expf(m - top) + other_s * expf(other_m - top);
  m = top;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    merge(m, s, __shfl_xor_sync(kFullMask, m, offset), __shfl_xor_sync(kFullMask, s, offset));
}

template <typename T, int P>
__global__ void __launch_bounds__(kLossThreads)
    cross_entropy_forward_kernel(float* losses, float* lse, const T* logits, const int32_t* targets,
                                 int64_t Vp, int V) {
  __shared__ float warp_m[kLossWarps], warp_s[kLossWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = blockIdx.x;
  const T* row = logits + n * Vp;
  float m = -INFINITY, s = 0;
  for (int c = threadIdx.x * P; c < V; c += kLossThreads * P) {
    float x[P];
    load_float(x, row + c);
    float top = m;
#pragma unroll
    for (int k = 0; k < P; ++k)
      if (c + k < V) top = fmaxf(top, x[k]);
    float sum = 0;
#pragma unroll
    for (int k = 0; k < P; ++k)
      if (c + k < V) sum += expf(x[k] - top);
    s = s * expf(m - top) + sum;
    m = top;
  }
  warp_merge(m, s);
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (warp != 0) return;
  m = lane < kLossWarps ? warp_m[lane] : -INFINITY;
  s = lane < kLossWarps ? warp_s[lane] : 0.f;
  warp_merge(m, s);
  if (lane == 0) {
    const float row_lse = m + logf(s);
    const int32_t target = targets[n];
    lse[n] = row_lse;
    if (target < 0) {
      losses[n] = 0.f;
    } else {
      losses[n] = target < V ? row_lse - to_float(row[target]) : row_lse;
    }
  }
}

template <typename T, int P>
__global__ void __launch_bounds__(kLossThreads)
    cross_entropy_backward_kernel(T* dlogits, const T* logits, const float* lse,
                                  const int32_t* targets, int64_t Vp, int V, float dloss) {
  const int64_t n = blockIdx.x;
  const int32_t target = targets[n];
  const float row_lse = lse[n];
  const T* row = logits + n * Vp;
  T* drow = dlogits + n * Vp;
  for (int c = threadIdx.x * P; c < Vp; c += kLossThreads * P) {
    float g[P];
    if (target < 0 || c >= V) {
#pragma unroll
      for (int k = 0; k < P; ++k) g[k] = 0.f;
    } else {
      load_float(g, row + c);
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int col = c + k;
        const float p = dloss * expf(g[k] - row_lse);
        g[k] = col >= V ? 0.f : (col == target ? p - dloss : p);
      }
    }
    store_float(drow + c, g);
  }
}

}  // namespace

template <typename T>
void cross_entropy_forward(float* losses, float* lse, const T* logits, const int32_t* targets,
                           int64_t N, int64_t Vp, int64_t V, cudaStream_t stream) {
  if (N <= 0) return;
  KILN_CHECK(V > 0 && V <= Vp && Vp < (int64_t{1} << 31) - kLossThreads * 8,
             "cross_entropy_forward: need 0 < V <= Vp < 2^31");
  KILN_CHECK(N < (int64_t{1} << 31), "cross_entropy_forward: too many rows");
  with_pack<T>(can_pack<kPack<T>>(Vp, logits), [&](auto p) {
    cross_entropy_forward_kernel<T, decltype(p)::value>
        <<<static_cast<unsigned>(N), kLossThreads, 0, stream>>>(losses, lse, logits, targets, Vp,
                                                                static_cast<int>(V));
    KILN_CUDA_CHECK_LAUNCH("cross_entropy_forward_kernel");
  });
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const float* lse, const int32_t* targets,
                            int64_t N, int64_t Vp, int64_t V, float dloss, cudaStream_t stream) {
  if (N <= 0) return;
  KILN_CHECK(V > 0 && V <= Vp && Vp < (int64_t{1} << 31) - kLossThreads * 8,
             "cross_entropy_backward: need 0 < V <= Vp < 2^31");
  KILN_CHECK(N < (int64_t{1} << 31), "cross_entropy_backward: too many rows");
  with_pack<T>(can_pack<kPack<T>>(Vp, dlogits, logits), [&](auto p) {
    cross_entropy_backward_kernel<T, decltype(p)::value>
        <<<static_cast<unsigned>(N), kLossThreads, 0, stream>>>(dlogits, logits, lse, targets, Vp,
                                                                static_cast<int>(V), dloss);
    KILN_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
  });
}

#define KILN_INSTANTIATE(T)                                                                    \
  template void cross_entropy_forward<T>(float*, float*, const T*, const int32_t*, int64_t,    \
                                         int64_t, int64_t, cudaStream_t);                      \
  template void cross_entropy_backward<T>(T*, const T*, const float*, const int32_t*, int64_t, \
                                          int64_t, int64_t, float, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
