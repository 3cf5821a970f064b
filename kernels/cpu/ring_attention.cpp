// Ring attention's blocks (context parallelism, ops.h): the local queries against one block of
// keys and values that travels the ring, merged into the running output by log-sum-exp.
//
// Forward keeps an online softmax per query row (its running max, sum and weighted values),
// then merges the block's normalised output into the running one:
//   lse' = log(exp(lse) + exp(lse_b)),  out' = out exp(lse - lse') + out_b exp(lse_b - lse').
// Backward rebuilds each probability from the merged log-sum-exp, as flash attention does:
//   p = exp(scale q.k - lse), dV += p dO, dS = p (dO.v - dO.out), dQ += scale dS k,
//   dK += scale dS q.
// One task per query row in forward; one per (batch, key/value head) in backward, whose
// query heads add into the same dK and dV rows.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

namespace {

template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

// Whether the query at token index `query`, starting at key `start`, sees the key at `key`.
bool sees(int32_t query, int32_t start, int32_t key) { return key <= query && key >= start; }

}  // namespace

template <typename T>
void ring_attention_forward(T* out, T* lse, const T* qkv, const T* kv, const int32_t* q_index,
                            const int32_t* k_index, const int32_t* key_starts, const HeadLayout& L,
                            int64_t keys) {
  const int64_t Tq = L.seq, hd = L.head_dim, width = L.qkv_width();
  const int64_t kv_width = 2 * L.n_kv_head * hd, v_at = L.n_kv_head * hd, out_width = L.n_head * hd;
  const int64_t group = L.n_head / L.n_kv_head;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel
  {
    std::vector<T> acc(static_cast<size_t>(hd));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < L.batch * L.n_head * Tq; ++row) {
      const int64_t b = row / (L.n_head * Tq), h = row / Tq % L.n_head, i = row % Tq, g = h / group;
      const T* q = qkv + (b * Tq + i) * width + h * hd;
      const int32_t query = q_index[i], start = key_starts ? key_starts[b * Tq + i] : 0;
      T max = -std::numeric_limits<T>::infinity(), sum = 0;
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t j = 0; j < keys; ++j) {
        if (!sees(query, start, k_index[j])) continue;
        const T* k = kv + (b * keys + j) * kv_width + g * hd;
        const T score = scale * dot(q, k, hd);
        if (score > max) {
          const T shrink = std::exp(max - score);
          sum *= shrink;
          for (T& a : acc) a *= shrink;
          max = score;
        }
        const T p = std::exp(score - max);
        sum += p;
        const T* v = k + v_at;
#pragma omp simd
        for (int64_t d = 0; d < hd; ++d) acc[d] += p * v[d];
      }
      if (sum == 0) continue;  // no key of this block is visible
      T* o = out + (b * Tq + i) * out_width + h * hd;
      T& running = lse[(b * L.n_head + h) * Tq + i];
      const T block = max + std::log(sum);
      const T merged = running > block ? running + std::log1p(std::exp(block - running))
                                       : block + std::log1p(std::exp(running - block));
      const T keep = std::exp(running - merged), add = std::exp(block - merged) / sum;
      for (int64_t d = 0; d < hd; ++d) o[d] = o[d] * keep + acc[d] * add;
      running = merged;
    }
  }
}

template <typename T>
void ring_attention_backward(T* dqkv, T* dkv, const T* dout, const T* qkv, const T* kv, const T* out,
                             const T* lse, const int32_t* q_index, const int32_t* k_index,
                             const int32_t* key_starts, const HeadLayout& L, int64_t keys) {
  const int64_t Tq = L.seq, hd = L.head_dim, width = L.qkv_width();
  const int64_t kv_width = 2 * L.n_kv_head * hd, v_at = L.n_kv_head * hd, out_width = L.n_head * hd;
  const int64_t group = L.n_head / L.n_kv_head;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel for schedule(static)
  for (int64_t bg = 0; bg < L.batch * L.n_kv_head; ++bg) {
    const int64_t b = bg / L.n_kv_head, g = bg % L.n_kv_head;
    for (int64_t h = g * group; h < (g + 1) * group; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t at = b * Tq + i;
        const T* q = qkv + at * width + h * hd;
        const T* d_o = dout + at * out_width + h * hd;
        T* dq = dqkv + at * width + h * hd;
        const T row_lse = lse[(b * L.n_head + h) * Tq + i];
        const T delta = dot(d_o, out + at * out_width + h * hd, hd);
        const int32_t query = q_index[i], start = key_starts ? key_starts[at] : 0;
        for (int64_t j = 0; j < keys; ++j) {
          if (!sees(query, start, k_index[j])) continue;
          const T* k = kv + (b * keys + j) * kv_width + g * hd;
          const T* v = k + v_at;
          T* dk = dkv + (b * keys + j) * kv_width + g * hd;
          T* dv = dk + v_at;
          const T p = std::exp(scale * dot(q, k, hd) - row_lse);
          const T ds = scale * p * (dot(d_o, v, hd) - delta);
#pragma omp simd
          for (int64_t d = 0; d < hd; ++d) {
            dv[d] += p * d_o[d];
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
          }
        }
      }
  }
}

namespace {

// Calls f(qkv column, kv element) for each element of the key and value heads.
template <typename T, typename F>
void for_each_kv(T* qkv, T* kv, const HeadLayout& L, F f) {
  const int64_t width = L.qkv_width(), kv_width = 2 * L.n_kv_head * L.head_dim;
  const int64_t first = L.n_head * L.head_dim;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < L.batch * L.seq; ++n)
    for (int64_t d = 0; d < kv_width; ++d) f(qkv[n * width + first + d], kv[n * kv_width + d]);
}

}  // namespace

template <typename T>
void split_kv(T* kv, const T* qkv, const HeadLayout& L) {
  for_each_kv(const_cast<T*>(qkv), kv, L, [](const T& column, T& element) { element = column; });
}

template <typename T>
void add_kv_gradient(T* dqkv, const T* dkv, const HeadLayout& L) {
  for_each_kv(dqkv, const_cast<T*>(dkv), L, [](T& column, const T& element) { column += element; });
}

#define KILN_INSTANTIATE(T)                                                                          \
  template void ring_attention_forward<T>(T*, T*, const T*, const T*, const int32_t*, const int32_t*, \
                                          const int32_t*, const HeadLayout&, int64_t);              \
  template void ring_attention_backward<T>(T*, T*, const T*, const T*, const T*, const T*, const T*,  \
                                           const int32_t*, const int32_t*, const int32_t*,          \
                                           const HeadLayout&, int64_t);                             \
  template void split_kv<T>(T*, const T*, const HeadLayout&);                                        \
  template void add_kv_gradient<T>(T*, const T*, const HeadLayout&);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
#undef KILN_INSTANTIATE

}  // namespace kiln::cpu
