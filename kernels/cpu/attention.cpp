// Rotary position embedding and causal grouped-query attention.
//
// Attention works one head at a time through BLAS: S = scale * Q K^T, a causal softmax
// row by row, O = P V. Only the log-sum-exp of each row is kept for backward, which
// rebuilds P from Q, K and the log-sum-exp, as a flash-attention kernel does.
#include <algorithm>
#include <cmath>
#include <limits>

#include <omp.h>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

template <typename T>
void rope(T* qkv, const T* table, const HeadLayout& L, bool inverse) {
  const int64_t width = L.qkv_width();
  const int64_t half = L.head_dim / 2;
  const int64_t rotated_heads = L.n_head + L.n_kv_head;  // queries and keys; values stay
  const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < L.batch * L.seq; ++n) {
    const T* angles = table + (n % L.seq) * half * 2;
    for (int64_t h = 0; h < rotated_heads; ++h) {
      T* x = qkv + n * width + h * L.head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const T c = angles[2 * i], s = sign * angles[2 * i + 1];
        const T x1 = x[i], x2 = x[i + half];
        x[i] = x1 * c - x2 * s;
        x[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

namespace {

// Fills P[seq, seq] with the causal softmax of scale * Q K^T. Forward computes each
// row's log-sum-exp into lse_out; backward passes the saved one as lse_in instead.
template <typename T>
void causal_probabilities(T* P, const T* q, const T* k, int64_t seq, int64_t head_dim,
                          int64_t width, const T* lse_in, T* lse_out) {
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  gemm<T>(false, true, seq, seq, head_dim, scale, q, width, k, width, T(0), P, seq);
  for (int64_t i = 0; i < seq; ++i) {
    T* row = P + i * seq;
    T row_lse;
    if (!lse_in) {
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, row[j]);
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j <= i; ++j) sum += vexp(row[j] - mx);
      row_lse = mx + std::log(sum);
      lse_out[i] = row_lse;
    } else {
      row_lse = lse_in[i];
    }
    for (int64_t j = 0; j <= i; ++j) row[j] = vexp(row[j] - row_lse);
    std::fill(row + i + 1, row + seq, T(0));
  }
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* lse, const T* qkv, const HeadLayout& L, T* scratch) {
  const int64_t seq = L.seq, hd = L.head_dim, width = L.qkv_width();
  const int64_t out_width = L.n_head * hd;
  const int64_t group = L.n_head / L.n_kv_head;
#pragma omp parallel for schedule(dynamic)
  for (int64_t bh = 0; bh < L.batch * L.n_head; ++bh) {
    const int64_t b = bh / L.n_head, h = bh % L.n_head, g = h / group;
    T* P = scratch + static_cast<int64_t>(omp_get_thread_num()) * 2 * seq * seq;
    const T* base = qkv + b * seq * width;
    const T* q = base + h * hd;
    const T* k = base + (L.n_head + g) * hd;
    const T* v = base + (L.n_head + L.n_kv_head + g) * hd;
    causal_probabilities<T>(P, q, k, seq, hd, width, nullptr, lse + bh * seq);
    gemm<T>(false, false, seq, hd, seq, T(1), P, seq, v, width, T(0),
            out + b * seq * out_width + h * hd, out_width);
  }
}

// One task per (batch, key/value head): the query heads that share a key/value head add
// into the same dK and dV, so they run in the same task, in head order.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                        const HeadLayout& L, T* scratch) {
  const int64_t seq = L.seq, hd = L.head_dim, width = L.qkv_width();
  const int64_t out_width = L.n_head * hd;
  const int64_t group = L.n_head / L.n_kv_head;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel for schedule(dynamic)
  for (int64_t bg = 0; bg < L.batch * L.n_kv_head; ++bg) {
    const int64_t b = bg / L.n_kv_head, g = bg % L.n_kv_head;
    T* P = scratch + static_cast<int64_t>(omp_get_thread_num()) * 2 * seq * seq;
    T* dS = P + seq * seq;
    const T* base = qkv + b * seq * width;
    T* dbase = dqkv + b * seq * width;
    const T* k = base + (L.n_head + g) * hd;
    const T* v = base + (L.n_head + L.n_kv_head + g) * hd;
    T* dk = dbase + (L.n_head + g) * hd;
    T* dv = dbase + (L.n_head + L.n_kv_head + g) * hd;
    for (int64_t t = 0; t < seq; ++t) {
      std::fill(dk + t * width, dk + t * width + hd, T(0));
      std::fill(dv + t * width, dv + t * width + hd, T(0));
    }
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const T* q = base + h * hd;
      const T* o = out + b * seq * out_width + h * hd;
      const T* d_o = dout + b * seq * out_width + h * hd;
      causal_probabilities<T>(P, q, k, seq, hd, width, lse + (b * L.n_head + h) * seq, nullptr);
      // dV += P^T dO and dP = dO V^T.
      gemm<T>(true, false, seq, hd, seq, T(1), P, seq, d_o, out_width, T(1), dv, width);
      gemm<T>(false, true, seq, seq, hd, T(1), d_o, out_width, v, width, T(0), dS, seq);
      // dS = P * (dP - rowsum(dO * O)), the softmax backward.
      for (int64_t i = 0; i < seq; ++i) {
        T delta = 0;
#pragma omp simd reduction(+ : delta)
        for (int64_t d = 0; d < hd; ++d) delta += d_o[i * out_width + d] * o[i * out_width + d];
        T* ds = dS + i * seq;
        const T* p = P + i * seq;
        for (int64_t j = 0; j <= i; ++j) ds[j] = p[j] * (ds[j] - delta);
        std::fill(ds + i + 1, ds + seq, T(0));
      }
      // dQ = scale * dS K and dK += scale * dS^T Q.
      gemm<T>(false, false, seq, hd, seq, scale, dS, seq, k, width, T(0), dbase + h * hd, width);
      gemm<T>(true, false, seq, hd, seq, scale, dS, seq, q, width, T(1), dk, width);
    }
  }
}

#define KILN_INSTANTIATE(T)                                                                  \
  template void rope<T>(T*, const T*, const HeadLayout&, bool);                              \
  template void attention_forward<T>(T*, T*, const T*, const HeadLayout&, T*);               \
  template void attention_backward<T>(T*, const T*, const T*, const T*, const T*,            \
                                      const HeadLayout&, T*);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
#undef KILN_INSTANTIATE

}  // namespace kiln::cpu
