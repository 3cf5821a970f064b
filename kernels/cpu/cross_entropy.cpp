// Softmax cross-entropy over the vocabulary. Forward keeps only the log-sum-exp of each
// row; backward turns the logits into their gradient in place, so the probabilities
// never take memory of their own.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

template <typename T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets, int64_t N,
                           int64_t Vp, int64_t V) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* row = logits + n * Vp;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < V; ++v) sum += vexp(row[v] - mx);
    lse[n] = mx + std::log(sum);
    // A target past the real columns is another vocabulary-parallel rank's: no target logit.
    if (targets[n] < 0) {
      losses[n] = T(0);
    } else {
      losses[n] = targets[n] < V ? lse[n] - row[targets[n]] : lse[n];
    }
  }
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                            int64_t N, int64_t Vp, int64_t V, double dloss) {
  const T d = static_cast<T>(dloss);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* row = logits + n * Vp;
    T* drow = dlogits + n * Vp;
    if (targets[n] < 0) {
      std::fill(drow, drow + Vp, T(0));
      continue;
    }
    const T row_lse = lse[n];
    for (int64_t v = 0; v < V; ++v) drow[v] = d * vexp(row[v] - row_lse);
    std::fill(drow + V, drow + Vp, T(0));
    if (targets[n] < V) drow[targets[n]] -= d;
  }
}

template void cross_entropy_forward<float>(float*, float*, const float*, const int32_t*, int64_t,
                                           int64_t, int64_t);
template void cross_entropy_forward<double>(double*, double*, const double*, const int32_t*,
                                            int64_t, int64_t, int64_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*,
                                            int64_t, int64_t, int64_t, double);
template void cross_entropy_backward<double>(double*, const double*, const double*,
                                             const int32_t*, int64_t, int64_t, int64_t, double);

}  // namespace kiln::cpu
