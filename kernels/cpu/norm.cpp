// LayerNorm and RMSNorm. Backward runs in two passes: the input gradient row by row,
// then the weight (and bias) gradients column block by column block, so no two
// threads add into the same value. Either pass alone is a split backward's half (dx, or
// the weights' when dx is null), and the same sums in the same order as both.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

namespace {
constexpr int64_t kColumnBlock = 32;
}

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                       int64_t N, int64_t C, double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    T m = 0;
#pragma omp simd reduction(+ : m)
    for (int64_t c = 0; c < C; ++c) m += xr[c];
    m /= static_cast<T>(C);
    T var = 0;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < C; ++c) var += (xr[c] - m) * (xr[c] - m);
    var /= static_cast<T>(C);
    const T s = static_cast<T>(1.0 / std::sqrt(static_cast<double>(var) + eps));
    T* o = out + n * C;
    for (int64_t c = 0; c < C; ++c) o[c] = (xr[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename T>
void layernorm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x,
                        const T* weight, const T* mean, const T* rstd, int64_t N, int64_t C) {
  if (dx) {  // else the weight gradients alone
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + n * C;
      const T* d = dout + n * C;
      const T m = mean[n], s = rstd[n];
      T mean_dnorm = 0, mean_dnorm_xhat = 0;
#pragma omp simd reduction(+ : mean_dnorm, mean_dnorm_xhat)
      for (int64_t c = 0; c < C; ++c) {
        const T dnorm = d[c] * weight[c];
        mean_dnorm += dnorm;
        mean_dnorm_xhat += dnorm * (xr[c] - m) * s;
      }
      mean_dnorm /= static_cast<T>(C);
      mean_dnorm_xhat /= static_cast<T>(C);
      T* dxr = dx + n * C;
      for (int64_t c = 0; c < C; ++c) {
        const T xhat = (xr[c] - m) * s;
        dxr[c] += s * (d[c] * weight[c] - mean_dnorm - xhat * mean_dnorm_xhat);
      }
    }
  }
  if (!dweight) return;  // frozen
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
    T dw[kColumnBlock] = {}, db[kColumnBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + n * C;
      const T* d = dout + n * C;
      for (int64_t c = c0; c < c1; ++c) {
        dw[c - c0] += d[c] * (xr[c] - mean[n]) * rstd[n];
        db[c - c0] += d[c];
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dweight[c] += dw[c - c0];
      dbias[c] += db[c - c0];
    }
  }
}

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                     double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    T ms = 0;
#pragma omp simd reduction(+ : ms)
    for (int64_t c = 0; c < C; ++c) ms += xr[c] * xr[c];
    ms /= static_cast<T>(C);
    const T s = static_cast<T>(1.0 / std::sqrt(static_cast<double>(ms) + eps));
    T* o = out + n * C;
    for (int64_t c = 0; c < C; ++c) o[c] = xr[c] * s * weight[c];
    rstd[n] = s;
  }
}

template <typename T>
void rmsnorm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight,
                      const T* rstd, int64_t N, int64_t C) {
  if (dx) {  // else the weight gradients alone
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + n * C;
      const T* d = dout + n * C;
      const T s = rstd[n];
      T mean_dnorm_xhat = 0;
#pragma omp simd reduction(+ : mean_dnorm_xhat)
      for (int64_t c = 0; c < C; ++c) mean_dnorm_xhat += d[c] * weight[c] * xr[c] * s;
      mean_dnorm_xhat /= static_cast<T>(C);
      T* dxr = dx + n * C;
      for (int64_t c = 0; c < C; ++c)
        dxr[c] += s * (d[c] * weight[c] - xr[c] * s * mean_dnorm_xhat);
    }
  }
  if (!dweight) return;  // frozen
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
    T dw[kColumnBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + n * C;
      const T* d = dout + n * C;
      for (int64_t c = c0; c < c1; ++c) dw[c - c0] += d[c] * xr[c] * rstd[n];
    }
    for (int64_t c = c0; c < c1; ++c) dweight[c] += dw[c - c0];
  }
}

#define KILN_INSTANTIATE(T)                                                                    \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t,       \
                                     int64_t, double);                                         \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,     \
                                      const T*, int64_t, int64_t);                             \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);     \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t,  \
                                    int64_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
#undef KILN_INSTANTIATE

}  // namespace kiln::cpu
