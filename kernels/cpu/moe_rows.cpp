// Moving token rows to their experts and back (ops.h, mixture of experts). Each output row
// is written by one thread and sums its terms in index order, so results do not depend on
// the number of threads.
#include <algorithm>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

template <typename T>
void gather_rows(T* out, const T* x, const int32_t* rows, const T* weights, int64_t M,
                 int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    T* o = out + m * C;
    if (rows[m] < 0) {
      std::fill(o, o + C, T(0));
      continue;
    }
    const T* src = x + static_cast<int64_t>(rows[m]) * C;
    const T w = weights ? weights[m] : T(1);
    for (int64_t c = 0; c < C; ++c) o[c] = w * src[c];
  }
}

template <typename T>
void combine_rows(T* out, const T* x, const int32_t* rows, const T* weights, int64_t N,
                  int64_t k, int64_t C, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* o = out + n * C;
    if (!accumulate) std::fill(o, o + C, T(0));
    for (int64_t j = 0; j < k; ++j) {
      const int32_t r = rows[n * k + j];
      if (r < 0) continue;
      const T* src = x + static_cast<int64_t>(r) * C;
      const T w = weights ? weights[n * k + j] : T(1);
      for (int64_t c = 0; c < C; ++c) o[c] += w * src[c];
    }
  }
}

template <typename T>
void row_dots(T* out, const T* a, const T* b, const int32_t* rows, int64_t N, int64_t k,
              int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t r = rows[n * k + j];
      double dot = 0;
      if (r >= 0) {
        const T* x = a + n * C;
        const T* y = b + static_cast<int64_t>(r) * C;
        for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(x[c]) * y[c];
      }
      out[n * k + j] = static_cast<T>(dot);
    }
  }
}

#define KILN_INSTANTIATE(T)                                                                    \
  template void gather_rows<T>(T*, const T*, const int32_t*, const T*, int64_t, int64_t);      \
  template void combine_rows<T>(T*, const T*, const int32_t*, const T*, int64_t, int64_t,      \
                                int64_t, bool);                                                \
  template void row_dots<T>(T*, const T*, const T*, const int32_t*, int64_t, int64_t, int64_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
#undef KILN_INSTANTIATE

}  // namespace kiln::cpu
