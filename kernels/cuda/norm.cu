// LayerNorm and RMSNorm: the twins of kernels/cpu/norm.cpp. Statistics (mean, rstd) are
// float, eps sits inside the root, all sums run in float.
//
// Forward: one warp per row (8 rows per 256-thread block), lanes stride the row in packs of
//   P; the mean and the variance are two passes over the row (as the CPU does; the second
//   and third reads of a row normally hit L1/L2), reduced with xor shuffles.
// Backward: the input gradient row by row (one warp per row, dx += ..., as the CPU; skipped
//   when dx is null, a split backward's weight pass), then the weight and bias gradients with column_sums_kernel (one block per 16 columns walking
//   every row, folded in a fixed order): deterministic, no atomics, no scratch memory.
#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kRowWarps = 8;
constexpr int kRowThreads = kRowWarps * 32;

__device__ __forceinline__ int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
}

template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* x, const T* weight,
                             const T* bias, int64_t N, int64_t C, float inv_C, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t n = warp_row();
  if (n >= N) return;
  const T* xr = x + n * C;
  float sum = 0;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P];
    load_float(v, xr + c);
#pragma unroll
    for (int k = 0; k < P; ++k) sum += v[k];
  }
  const float m = warp_sum(sum) * inv_C;
  float sq = 0;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P];
    load_float(v, xr + c);
#pragma unroll
    for (int k = 0; k < P; ++k) sq += (v[k] - m) * (v[k] - m);
  }
  const float s = __frsqrt_rn(warp_sum(sq) * inv_C + eps);
  T* o = out + n * C;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P], w[P], b[P];
    load_float(v, xr + c);
    load_float(w, weight + c);
    load_float(b, bias + c);
#pragma unroll
    for (int k = 0; k < P; ++k) v[k] = (v[k] - m) * s * w[k] + b[k];
    store_float(o + c, v);
  }
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_forward_kernel(T* out, float* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                           float inv_C, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t n = warp_row();
  if (n >= N) return;
  const T* xr = x + n * C;
  float sq = 0;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P];
    load_float(v, xr + c);
#pragma unroll
    for (int k = 0; k < P; ++k) sq += v[k] * v[k];
  }
  const float s = __frsqrt_rn(warp_sum(sq) * inv_C + eps);
  T* o = out + n * C;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P], w[P];
    load_float(v, xr + c);
    load_float(w, weight + c);
#pragma unroll
    for (int k = 0; k < P; ++k) v[k] = v[k] * s * w[k];
    store_float(o + c, v);
  }
  if (lane == 0) rstd[n] = s;
}

// dx += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = dout * weight.
template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_backward_dx_kernel(T* dx, const T* dout, const T* x, const T* weight,
                                 const float* mean, const float* rstd, int64_t N, int64_t C,
                                 float inv_C) {
  const int lane = threadIdx.x % 32;
  const int64_t n = warp_row();
  if (n >= N) return;
  const T* xr = x + n * C;
  const T* dr = dout + n * C;
  const float m = mean[n], s = rstd[n];
  float sum_dnorm = 0, sum_dnorm_xhat = 0;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P], d[P], w[P];
    load_float(v, xr + c);
    load_float(d, dr + c);
    load_float(w, weight + c);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float dnorm = d[k] * w[k];
      sum_dnorm += dnorm;
      sum_dnorm_xhat += dnorm * (v[k] - m) * s;
    }
  }
  const float mean_dnorm = warp_sum(sum_dnorm) * inv_C;
  const float mean_dnorm_xhat = warp_sum(sum_dnorm_xhat) * inv_C;
  T* g = dx + n * C;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P], d[P], w[P], acc[P];
    load_float(v, xr + c);
    load_float(d, dr + c);
    load_float(w, weight + c);
    load_float(acc, g + c);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float xhat = (v[k] - m) * s;
      acc[k] += s * (d[k] * w[k] - mean_dnorm - xhat * mean_dnorm_xhat);
    }
    store_float(g + c, acc);
  }
}

// dx += rstd * (dnorm - xhat * mean(dnorm * xhat)), xhat = x * rstd.
template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_backward_dx_kernel(T* dx, const T* dout, const T* x, const T* weight, const float* rstd,
                               int64_t N, int64_t C, float inv_C) {
  const int lane = threadIdx.x % 32;
  const int64_t n = warp_row();
  if (n >= N) return;
  const T* xr = x + n * C;
  const T* dr = dout + n * C;
  const float s = rstd[n];
  float sum_dnorm_xhat = 0;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P], d[P], w[P];
    load_float(v, xr + c);
    load_float(d, dr + c);
    load_float(w, weight + c);
#pragma unroll
    for (int k = 0; k < P; ++k) sum_dnorm_xhat += d[k] * w[k] * v[k] * s;
  }
  const float mean_dnorm_xhat = warp_sum(sum_dnorm_xhat) * inv_C;
  T* g = dx + n * C;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P], d[P], w[P], acc[P];
    load_float(v, xr + c);
    load_float(d, dr + c);
    load_float(w, weight + c);
    load_float(acc, g + c);
#pragma unroll
    for (int k = 0; k < P; ++k) acc[k] += s * (d[k] * w[k] - v[k] * s * mean_dnorm_xhat);
    store_float(g + c, acc);
  }
}

// Column terms for column_sums_kernel: dweight (k = 0) and dbias (k = 1).
template <typename T>
struct LayerNormParamGrad {
  const T* dout;
  const T* x;
  const float* mean;
  const float* rstd;
  int64_t C;
  template <int P, int K>
  __device__ void operator()(int64_t n, int64_t c, float (&acc)[K][P]) const {
    float d[P], v[P];
    load_float(d, dout + n * C + c);
    load_float(v, x + n * C + c);
    const float m = mean[n], s = rstd[n];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      acc[0][k] += d[k] * (v[k] - m) * s;
      if constexpr (K == 2) acc[1][k] += d[k];
    }
  }
};

template <typename T>
struct RmsNormWeightGrad {
  const T* dout;
  const T* x;
  const float* rstd;
  int64_t C;
  template <int P, int K>
  __device__ void operator()(int64_t n, int64_t c, float (&acc)[K][P]) const {
    float d[P], v[P];
    load_float(d, dout + n * C + c);
    load_float(v, x + n * C + c);
    const float s = rstd[n];
#pragma unroll
    for (int k = 0; k < P; ++k) acc[0][k] += d[k] * v[k] * s;
  }
};

unsigned row_blocks(int64_t N) { return blocks_for(N, kRowWarps); }

// 1 / C, rounded once: the kernels multiply by it instead of dividing (a division's slow
// path is a call that spills registers).
float inv(int64_t C) { return static_cast<float>(1.0 / static_cast<double>(C)); }

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* x, const T* weight, const T* bias,
                       int64_t N, int64_t C, float eps, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  with_pack<T>(can_pack<kPack<T>>(C, out, x, weight, bias), [&](auto p) {
    layernorm_forward_kernel<T, decltype(p)::value><<<row_blocks(N), kRowThreads, 0, stream>>>(
        out, mean, rstd, x, weight, bias, N, C, inv(C), eps);
    KILN_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
  });
}

template <typename T>
void layernorm_backward(T* dx, float* dweight, float* dbias, const T* dout, const T* x,
                        const T* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  with_pack<T>(can_pack<kPack<T>>(C, dx, dout, x, weight), [&](auto p) {
    constexpr int P = decltype(p)::value;
    if (dx) {  // else the weight gradients alone
      layernorm_backward_dx_kernel<T, P>
          <<<row_blocks(N), kRowThreads, 0, stream>>>(dx, dout, x, weight, mean, rstd, N, C, inv(C));
      KILN_CUDA_CHECK_LAUNCH("layernorm_backward_dx_kernel");
    }
    if (!dweight) return;  // frozen
    const LayerNormParamGrad<T> term{dout, x, mean, rstd, C};
    if (dbias) {
      launch_column_sums<P, 2>(dweight, dbias, N, C, term, stream);
    } else {
      launch_column_sums<P, 1>(dweight, nullptr, N, C, term, stream);
    }
  });
}

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                     float eps, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  with_pack<T>(can_pack<kPack<T>>(C, out, x, weight), [&](auto p) {
    rmsnorm_forward_kernel<T, decltype(p)::value>
        <<<row_blocks(N), kRowThreads, 0, stream>>>(out, rstd, x, weight, N, C, inv(C), eps);
    KILN_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
  });
}

template <typename T>
void rmsnorm_backward(T* dx, float* dweight, const T* dout, const T* x, const T* weight,
                      const float* rstd, int64_t N, int64_t C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  with_pack<T>(can_pack<kPack<T>>(C, dx, dout, x, weight), [&](auto p) {
    constexpr int P = decltype(p)::value;
    if (dx) {  // else the weight gradients alone
      rmsnorm_backward_dx_kernel<T, P>
          <<<row_blocks(N), kRowThreads, 0, stream>>>(dx, dout, x, weight, rstd, N, C, inv(C));
      KILN_CUDA_CHECK_LAUNCH("rmsnorm_backward_dx_kernel");
    }
    if (dweight)  // else frozen
      launch_column_sums<P, 1>(dweight, nullptr, N, C, RmsNormWeightGrad<T>{dout, x, rstd, C},
                               stream);
  });
}

#define KILN_INSTANTIATE(T)                                                                        \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int64_t,    \
                                     int64_t, float, cudaStream_t);                                \
  template void layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*,            \
                                      const float*, const float*, int64_t, int64_t, cudaStream_t); \
  template void rmsnorm_forward<T>(T*, float*, const T*, const T*, int64_t, int64_t, float,        \
                                   cudaStream_t);                                                  \
  template void rmsnorm_backward<T>(T*, float*, const T*, const T*, const T*, const float*,        \
                                    int64_t, int64_t, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
