// Elementwise ops, reductions and bias handling.
#include <algorithm>
#include <vector>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

template <typename T>
void fill(T* x, int64_t n, T value) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

template <typename T>
void add(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void scale(T* x, int64_t n, T factor) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

// Partial sums over fixed chunks, added in chunk order: the same bits for any number
// of threads.
template <typename T>
double sum_squares(const T* x, int64_t n) {
  constexpr int64_t kChunks = 64;
  double partial[kChunks] = {};
  const int64_t chunk = (n + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < kChunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * chunk);
    double s = 0;
    for (int64_t i = c * chunk; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
    partial[c] = s;
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

template <typename T>
void add_bias(T* out, const T* bias, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* row = out + n * C;
    for (int64_t c = 0; c < C; ++c) row[c] += bias[c];
  }
}

template <typename T>
void add_columns(T* out, const T* x, int64_t N, int64_t C, int64_t c, int64_t first, T factor) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < c; ++j) out[n * C + first + j] += factor * x[n * c + j];
}

template <typename T>
void take_columns(T* out, const T* x, int64_t N, int64_t C, int64_t c, int64_t first, T factor) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < c; ++j) out[n * c + j] = factor * x[n * C + first + j];
}

template <typename T>
void copy_head_columns(T* out, const T* x, int64_t N, int64_t out_cols, int64_t x_cols, const HeadColumns& k) {
  const bool sums = k.out_stride == 0 && k.heads > 1;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* o = out + n * out_cols;
    const T* r = x + n * x_cols;
    if (sums) std::fill(o + k.out_first, o + k.out_first + k.width, T(0));
    for (int64_t h = 0; h < k.heads; ++h)
      for (int64_t c = 0; c < k.width; ++c) {
        const T v = r[k.x_first + h * k.x_stride + c];
        T& dst = o[k.out_first + h * k.out_stride + c];
        dst = sums ? dst + v : v;
      }
  }
}

// Each thread owns a block of columns and walks every row: deterministic, and rows are
// read in contiguous pieces.
template <typename T>
void bias_backward(T* dbias, const T* dout, int64_t N, int64_t C) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
    T acc[kBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* row = dout + n * C;
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
    }
    for (int64_t c = c0; c < c1; ++c) dbias[c] += acc[c - c0];
  }
}

#define KILN_INSTANTIATE(T)                                              \
  template void fill<T>(T*, int64_t, T);                                 \
  template void add<T>(T*, const T*, const T*, int64_t);                 \
  template void scale<T>(T*, int64_t, T);                                \
  template double sum_squares<T>(const T*, int64_t);                     \
  template void add_bias<T>(T*, const T*, int64_t, int64_t);             \
  template void add_columns<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, T); \
  template void take_columns<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, T); \
  template void copy_head_columns<T>(T*, const T*, int64_t, int64_t, int64_t, const HeadColumns&); \
  template void bias_backward<T>(T*, const T*, int64_t, int64_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
template void fill<int32_t>(int32_t*, int64_t, int32_t);
#undef KILN_INSTANTIATE

}  // namespace kiln::cpu
