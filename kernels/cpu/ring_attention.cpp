// Ring attention's blocks (context parallelism, ops.h): the local queries against one block of
// keys and values that travels the ring, merged into the running output by log-sum-exp.
//
// Both passes work a tile of kTile queries of one head at a time, against the keys the tile
// sees: a block's token indices rise (a rank's two chunks in order), so the keys a query sees,
// [its start, itself], are one run of the block, and a tile's runs lie within the span from the
// lowest start to the last query. Scores are held transposed, S^T[key][query], so the products
// and the softmax run down whole vectors of queries (as attention.cpp's kernel does), and the
// keys a query does not see in the span are masked.
//
// Forward merges the tile's normalised output into the running one:
//   lse' = log(exp(lse) + exp(lse_b)),  out' = out exp(lse - lse') + out_b exp(lse_b - lse').
// Backward rebuilds each probability from the merged log-sum-exp, as flash attention does:
//   p = exp(scale q.k - lse), dV += p dO, dS = p (dO.v - dO.out), dQ += scale dS k,
//   dK += scale dS q.
// One task per (batch, head) in forward; one per (batch, key/value head) in backward, whose
// query heads add into the same dK and dV rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kTile = 16;

// Whether the query at token index `query`, starting at key `start`, sees the key at `key`.
bool sees(int32_t query, int32_t start, int32_t key) { return key <= query && key >= start; }

// A tile of queries [i0, i0 + rows) of one head and the span [lo, hi) of the block's keys it
// sees: their token indices, starts, and transposed values.
template <typename T>
struct QueryTile {
  int64_t rows = 0, lo = 0, hi = 0;
  int32_t query[kTile] = {}, start[kTile] = {};

  QueryTile(int64_t i0, int64_t Tq, const int32_t* q_index, const int32_t* starts, const int32_t* k_index,
            int64_t keys) {
    rows = std::min(kTile, Tq - i0);
    int32_t first = std::numeric_limits<int32_t>::max(), last = std::numeric_limits<int32_t>::min();
    for (int64_t i = 0; i < rows; ++i) {
      query[i] = q_index[i0 + i];
      start[i] = starts ? starts[i0 + i] : 0;
      first = std::min(first, start[i]);
      last = std::max(last, query[i]);
    }
    lo = std::lower_bound(k_index, k_index + keys, first) - k_index;
    hi = std::upper_bound(k_index, k_index + keys, last) - k_index;
  }
  bool empty() const { return lo >= hi; }
};

// at[d][i] = a[i][d] for the tile's rows (a's rows at stride a_ld), zero past them.
template <typename T>
void transpose_tile(T* at, const QueryTile<T>& tile, const T* a, int64_t a_ld, int64_t hd) {
  for (int64_t d = 0; d < hd; ++d)
    for (int64_t i = 0; i < kTile; ++i) at[d * kTile + i] = i < tile.rows ? a[i * a_ld + d] : T(0);
}

// st[j][i] = scale * (column i of at) . (key j of b) over the tile's span, then value where
// query i does not see key j; b's keys at stride b_ld.
template <typename T>
void scores(T* st, const QueryTile<T>& tile, const T* at, const T* b, int64_t b_ld, int64_t hd, T scale,
            const int32_t* k_index, T value) {
  for (int64_t j = tile.lo; j < tile.hi; ++j) {
    T* row = st + (j - tile.lo) * kTile;
    std::fill(row, row + kTile, T(0));
    const T* key = b + j * b_ld;
    for (int64_t d = 0; d < hd; ++d) {
      const T k = key[d];
      const T* column = at + d * kTile;
#pragma omp simd
      for (int64_t i = 0; i < kTile; ++i) row[i] += k * column[i];
    }
    const int32_t key_index = k_index[j];
    for (int64_t i = 0; i < kTile; ++i)
      row[i] = i < tile.rows && sees(tile.query[i], tile.start[i], key_index) ? scale * row[i] : value;
  }
}

}  // namespace

template <typename T>
void ring_attention_forward(T* out, T* lse, const T* qkv, const T* kv, const int32_t* q_index,
                            const int32_t* k_index, const int32_t* key_starts, const HeadLayout& L,
                            int64_t keys) {
  const int64_t Tq = L.seq, hd = L.head_dim, width = L.qkv_width();
  const int64_t kv_width = 2 * L.n_kv_head * hd, v_at = L.n_kv_head * hd, out_width = L.n_head * hd;
  const int64_t group = L.n_head / L.n_kv_head;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  const T minus_infinity = -std::numeric_limits<T>::infinity();
#pragma omp parallel
  {
    std::vector<T> st(static_cast<size_t>(keys * kTile)), acc(static_cast<size_t>(kTile * hd));
    std::vector<T> qt(static_cast<size_t>(hd * kTile));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < L.batch * L.n_head; ++bh) {
      const int64_t b = bh / L.n_head, h = bh % L.n_head, g = h / group;
      const T* k0 = kv + b * keys * kv_width + g * hd;
      const int32_t* starts = key_starts ? key_starts + b * Tq : nullptr;
      for (int64_t i0 = 0; i0 < Tq; i0 += kTile) {
        const QueryTile<T> tile(i0, Tq, q_index, starts, k_index, keys);
        if (tile.empty()) continue;
        transpose_tile(qt.data(), tile, qkv + (b * Tq + i0) * width + h * hd, width, hd);
        scores(st.data(), tile, qt.data(), k0, kv_width, hd, scale, k_index, minus_infinity);
        T max[kTile], sum[kTile] = {};
        std::fill(max, max + kTile, minus_infinity);
        for (int64_t j = 0; j < tile.hi - tile.lo; ++j)
          for (int64_t i = 0; i < kTile; ++i) max[i] = std::max(max[i], st[j * kTile + i]);
        std::fill(acc.begin(), acc.end(), T(0));
        for (int64_t j = 0; j < tile.hi - tile.lo; ++j) {
          // exp(S - max), 0 where a query does not see the key (vexp clamps, never reaching 0).
          T* p = st.data() + j * kTile;
#pragma omp simd
          for (int64_t i = 0; i < kTile; ++i) {
            p[i] = p[i] == minus_infinity ? T(0) : vexp(p[i] - max[i]);
            sum[i] += p[i];
          }
          const T* v = k0 + (tile.lo + j) * kv_width + v_at;
          for (int64_t i = 0; i < tile.rows; ++i) {
            if (p[i] == 0) continue;
            T* a = acc.data() + i * hd;
#pragma omp simd
            for (int64_t d = 0; d < hd; ++d) a[d] += p[i] * v[d];
          }
        }
        for (int64_t i = 0; i < tile.rows; ++i) {
          if (sum[i] == 0) continue;
          T* o = out + (b * Tq + i0 + i) * out_width + h * hd;
          T& running = lse[(b * L.n_head + h) * Tq + i0 + i];
          const T block = max[i] + std::log(sum[i]);
          const T merged = running > block ? running + std::log1p(std::exp(block - running))
                                           : block + std::log1p(std::exp(running - block));
          const T keep = std::exp(running - merged), add = std::exp(block - merged) / sum[i];
          const T* a = acc.data() + i * hd;
          for (int64_t d = 0; d < hd; ++d) o[d] = o[d] * keep + a[d] * add;
          running = merged;
        }
      }
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
#pragma omp parallel
  {
    std::vector<T> pt(static_cast<size_t>(keys * kTile)), dpt(static_cast<size_t>(keys * kTile));
    std::vector<T> qt(static_cast<size_t>(hd * kTile)), dot(static_cast<size_t>(hd * kTile));
#pragma omp for schedule(static)
    for (int64_t bg = 0; bg < L.batch * L.n_kv_head; ++bg) {
      const int64_t b = bg / L.n_kv_head, g = bg % L.n_kv_head;
      const T* k0 = kv + b * keys * kv_width + g * hd;
      T* dk0 = dkv + b * keys * kv_width + g * hd;
      const int32_t* starts = key_starts ? key_starts + b * Tq : nullptr;
      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t i0 = 0; i0 < Tq; i0 += kTile) {
          const QueryTile<T> tile(i0, Tq, q_index, starts, k_index, keys);
          if (tile.empty()) continue;
          const T* q = qkv + (b * Tq + i0) * width + h * hd;
          const T* d_o = dout + (b * Tq + i0) * out_width + h * hd;
          T* dq = dqkv + (b * Tq + i0) * width + h * hd;
          // P from the merged lse, dP = dO V^T, then dS = scale P (dP - delta).
          transpose_tile(qt.data(), tile, q, width, hd);
          transpose_tile(dot.data(), tile, d_o, out_width, hd);
          scores(pt.data(), tile, qt.data(), k0, kv_width, hd, scale, k_index, -std::numeric_limits<T>::infinity());
          scores(dpt.data(), tile, dot.data(), k0 + v_at, kv_width, hd, T(1), k_index, T(0));
          T row_lse[kTile] = {}, delta[kTile] = {};
          for (int64_t i = 0; i < tile.rows; ++i) {
            row_lse[i] = lse[(b * L.n_head + h) * Tq + i0 + i];
            const T* o = out + (b * Tq + i0 + i) * out_width + h * hd;
            for (int64_t d = 0; d < hd; ++d) delta[i] += d_o[i * out_width + d] * o[d];
          }
          // Unseen keys and the rows past the tile's are -inf: their p is 0.
          const T minus_infinity = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j < tile.hi - tile.lo; ++j) {
            T* p = pt.data() + j * kTile;
            T* ds = dpt.data() + j * kTile;
#pragma omp simd
            for (int64_t i = 0; i < kTile; ++i) {
              p[i] = p[i] == minus_infinity ? T(0) : vexp(p[i] - row_lse[i]);
              ds[i] = scale * p[i] * (ds[i] - delta[i]);
            }
          }
          for (int64_t j = 0; j < tile.hi - tile.lo; ++j) {
            const T* k = k0 + (tile.lo + j) * kv_width;
            T* dk = dk0 + (tile.lo + j) * kv_width;
            T* dv = dk + v_at;
            for (int64_t i = 0; i < tile.rows; ++i) {
              const T p = pt[j * kTile + i], ds = dpt[j * kTile + i];
              if (p == 0 && ds == 0) continue;
              const T* qi = q + i * width;
              const T* doi = d_o + i * out_width;
              T* dqi = dq + i * width;
#pragma omp simd
              for (int64_t d = 0; d < hd; ++d) {
                dv[d] += p * doi[d];
                dk[d] += ds * qi[d];
                dqi[d] += ds * k[d];
              }
            }
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
