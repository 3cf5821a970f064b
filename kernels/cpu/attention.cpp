// Rotary position embedding and causal grouped-query attention.
//
// Attention works one head at a time through BLAS, in blocks of query rows:
// S = scale * Q K^T, a causal softmax row by row, O = P V. Only the log-sum-exp of each row is kept for backward, which
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

// Query rows are processed in blocks; block [r0, r1) only meets keys [0, r1), so the
// products skip most of the masked upper triangle.
constexpr int64_t kRowBlock = 32;

// Fills rows [r0, r1) of P (row stride seq, columns [0, r1)) with the causal softmax of
// scale * Q K^T. Forward computes each row's log-sum-exp into lse_out; backward passes
// the saved one as lse_in instead.
template <typename T>
void causal_probabilities(T* P, const T* q, const T* k, int64_t r0, int64_t r1, int64_t seq,
                          int64_t head_dim, int64_t width, const T* lse_in, T* lse_out) {
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  gemm<T>(false, true, r1 - r0, r1, head_dim, scale, q + r0 * width, width, k, width, T(0),
          P + r0 * seq, seq);
  for (int64_t i = r0; i < r1; ++i) {
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
    std::fill(row + i + 1, row + r1, T(0));
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
    T* o = out + b * seq * out_width + h * hd;
    for (int64_t r0 = 0; r0 < seq; r0 += kRowBlock) {
      const int64_t r1 = std::min(seq, r0 + kRowBlock);
      causal_probabilities<T>(P, q, k, r0, r1, seq, hd, width, nullptr, lse + bh * seq);
      gemm<T>(false, false, r1 - r0, hd, r1, T(1), P + r0 * seq, seq, v, width, T(0),
              o + r0 * out_width, out_width);
    }
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
      T* dq = dbase + h * hd;
      for (int64_t r0 = 0; r0 < seq; r0 += kRowBlock) {
        const int64_t r1 = std::min(seq, r0 + kRowBlock), rows = r1 - r0;
        causal_probabilities<T>(P, q, k, r0, r1, seq, hd, width, lse + (b * L.n_head + h) * seq,
                                nullptr);
        const T* p = P + r0 * seq;
        T* ds = dS + r0 * seq;
        // dV[0, r1) += P^T dO and dP = dO V^T over this block's rows.
        gemm<T>(true, false, r1, hd, rows, T(1), p, seq, d_o + r0 * out_width, out_width, T(1), dv,
                width);
        gemm<T>(false, true, rows, r1, hd, T(1), d_o + r0 * out_width, out_width, v, width, T(0),
                ds, seq);
        // dS = P * (dP - rowsum(dO * O)), the softmax backward.
        for (int64_t i = r0; i < r1; ++i) {
          T delta = 0;
#pragma omp simd reduction(+ : delta)
          for (int64_t d = 0; d < hd; ++d) delta += d_o[i * out_width + d] * o[i * out_width + d];
          T* ds_row = dS + i * seq;
          const T* p_row = P + i * seq;
          for (int64_t j = 0; j <= i; ++j) ds_row[j] = p_row[j] * (ds_row[j] - delta);
          std::fill(ds_row + i + 1, ds_row + r1, T(0));
        }
        // dQ = scale * dS K and dK[0, r1) += scale * dS^T Q.
        gemm<T>(false, false, rows, hd, r1, scale, ds, seq, k, width, T(0), dq + r0 * width, width);
        gemm<T>(true, false, r1, hd, rows, scale, ds, seq, q + r0 * width, width, T(1), dk, width);
      }
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
