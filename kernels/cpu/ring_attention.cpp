// Ring attention's blocks (context parallelism, ops.h): the local queries against one block of
// keys and values that travels the ring, merged into the running output by log-sum-exp.
//
// As attention.cpp's kernel does, one task per (batch, key/value head) packs the block's K and
// V of that head once, then takes the queries of its heads kRows at a time, their scores held
// transposed, S^T = K Q^T (a row per key, a column per query), through the register-tiled
// product() of register_tiles.h. A block's token indices rise (a rank's two chunks in order),
// so the keys a query sees, [its start, itself], are one run of the block, and a tile's runs
// lie within the span from the lowest start to the last query (binary search); within the span
// the keys a query does not see are masked.
//
// Forward merges the tile's normalised output into the running one:
//   lse' = log(exp(lse) + exp(lse_b)),  out' = out exp(lse - lse') + out_b exp(lse_b - lse').
// Backward rebuilds each probability from the merged log-sum-exp, as flash attention does:
//   P = exp(scale S - lse), dV += P^T dO, dS = scale P (dO V^T - rowsum(dO * out)),
//   dQ += dS K, dK += dS^T Q; the block's dK and dV add into dkv at the end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/register_tiles.h"

namespace kiln::cpu {

namespace {

// Whether the query at token index `query`, starting at key `start`, sees the key at `key`.
bool sees(int32_t query, int32_t start, int32_t key) { return key <= query && key >= start; }

// kRows queries [i0, i0 + rows) of one head and the span [lo, hi) of the block's keys they see.
struct QueryTile {
  int64_t rows = 0, lo = 0, hi = 0;
  int32_t query[kRows] = {}, start[kRows] = {};

  QueryTile(int64_t i0, int64_t Tq, const int32_t* q_index, const int32_t* starts, const int32_t* k_index,
            int64_t keys) {
    rows = std::min(kRows, Tq - i0);
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
  int64_t span() const { return hi - lo; }
  // Row j of the span's S^T: scale times the scores the queries see, value elsewhere (and past
  // the tile's rows).
  template <typename T>
  void mask(T* row, int32_t key, T scale, T value) const {
    for (int64_t i = 0; i < kRows; ++i) row[i] = i < rows && sees(query[i], start[i], key) ? scale * row[i] : value;
  }
};

// What both passes index with: the queries Tq, the head dim (hd, padded hp), the row widths of
// qkv, kv (whose value heads start at v_at) and out, the query heads per key/value head, and
// the scores' scale.
template <typename T>
struct RingShape {
  int64_t Tq, hd, hp, width, kv_width, v_at, out_width, group;
  T scale;
};

template <typename T>
RingShape<T> ring_shape(const HeadLayout& L) {
  const int64_t hd = L.head_dim;
  return {L.seq,         hd,           padded<T>(hd),       L.qkv_width(), 2 * L.n_kv_head * hd, L.n_kv_head * hd,
          L.n_head * hd, L.n_head / L.n_kv_head, static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)))};
}

// A head's K and V of one block, packed as product() reads them: [keys, padded head dim].
template <typename T>
void pack_head(T* kp, T* vp, const T* kv, int64_t keys, int64_t kv_width, int64_t v_at, int64_t hd) {
  pack_rows(kp, kv, kv_width, keys, hd);
  pack_rows(vp, kv + v_at, kv_width, keys, hd);
}

}  // namespace

template <typename T>
void ring_attention_forward(T* out, T* lse, const T* qkv, const T* kv, const int32_t* q_index,
                            const int32_t* k_index, const int32_t* key_starts, const HeadLayout& L,
                            int64_t keys) {
  const auto [Tq, hd, hp, width, kv_width, v_at, out_width, group, scale] = ring_shape<T>(L);
  const T minus_infinity = -std::numeric_limits<T>::infinity();
#pragma omp parallel
  {
    std::vector<T> kp(static_cast<size_t>(keys * hp)), vp(kp.size()), st(static_cast<size_t>(keys * kRows));
    std::vector<T> qt(static_cast<size_t>(hd * kRows)), o(static_cast<size_t>(kRows * hp));
#pragma omp for schedule(static)
    for (int64_t bg = 0; bg < L.batch * L.n_kv_head; ++bg) {
      const int64_t b = bg / L.n_kv_head, g = bg % L.n_kv_head;
      pack_head(kp.data(), vp.data(), kv + b * keys * kv_width + g * hd, keys, kv_width, v_at, hd);
      const int32_t* starts = key_starts ? key_starts + b * Tq : nullptr;
      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t i0 = 0; i0 < Tq; i0 += kRows) {
          const QueryTile tile(i0, Tq, q_index, starts, k_index, keys);
          if (tile.span() <= 0) continue;
          pack_block_transposed(qt.data(), qkv + (b * Tq + i0) * width + h * hd, width, tile.rows, hd);
          product(st.data(), kRows, kp.data() + tile.lo * hp, hp, 1, qt.data(), kRows, tile.span(), kRows, hd, false);
          T max[kRows], sum[kRows] = {};
          std::fill(max, max + kRows, minus_infinity);
          for (int64_t j = 0; j < tile.span(); ++j) {
            T* row = st.data() + j * kRows;
            tile.mask(row, k_index[tile.lo + j], scale, minus_infinity);
#pragma omp simd
            for (int64_t i = 0; i < kRows; ++i) max[i] = max[i] > row[i] ? max[i] : row[i];
          }
          // exp(S - max), 0 where a query does not see the key (vexp clamps, never reaching 0).
          for (int64_t j = 0; j < tile.span(); ++j) {
            T* row = st.data() + j * kRows;
#pragma omp simd
            for (int64_t i = 0; i < kRows; ++i) {
              row[i] = row[i] == minus_infinity ? T(0) : vexp(row[i] - max[i]);
              sum[i] += row[i];
            }
          }
          product(o.data(), hp, st.data(), 1, kRows, vp.data() + tile.lo * hp, hp, tile.rows, hp, tile.span(), false);
          for (int64_t i = 0; i < tile.rows; ++i) {
            if (sum[i] == 0) continue;  // sees no key of this block
            T* y = out + (b * Tq + i0 + i) * out_width + h * hd;
            T& running = lse[(b * L.n_head + h) * Tq + i0 + i];
            const T block = max[i] + std::log(sum[i]);
            const T merged = running > block ? running + std::log1p(std::exp(block - running))
                                             : block + std::log1p(std::exp(running - block));
            const T keep = std::exp(running - merged), add = std::exp(block - merged) / sum[i];
            for (int64_t d = 0; d < hd; ++d) y[d] = y[d] * keep + o[i * hp + d] * add;
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
  const auto [Tq, hd, hp, width, kv_width, v_at, out_width, group, scale] = ring_shape<T>(L);
  const T minus_infinity = -std::numeric_limits<T>::infinity();
#pragma omp parallel
  {
    std::vector<T> kp(static_cast<size_t>(keys * hp)), vp(kp.size()), dk(kp.size()), dv(kp.size());
    std::vector<T> pt(static_cast<size_t>(keys * kRows)), dst(pt.size());
    std::vector<T> qt(static_cast<size_t>(hd * kRows)), dot(qt.size());
    std::vector<T> qp(static_cast<size_t>(kRows * hp)), dop(qp.size()), dq(qp.size());
#pragma omp for schedule(static)
    for (int64_t bg = 0; bg < L.batch * L.n_kv_head; ++bg) {
      const int64_t b = bg / L.n_kv_head, g = bg % L.n_kv_head;
      pack_head(kp.data(), vp.data(), kv + b * keys * kv_width + g * hd, keys, kv_width, v_at, hd);
      std::fill(dk.begin(), dk.end(), T(0));
      std::fill(dv.begin(), dv.end(), T(0));
      const int32_t* starts = key_starts ? key_starts + b * Tq : nullptr;
      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t i0 = 0; i0 < Tq; i0 += kRows) {
          const QueryTile tile(i0, Tq, q_index, starts, k_index, keys);
          if (tile.span() <= 0) continue;
          const int64_t rows = tile.rows, span = tile.span();
          const T* q = qkv + (b * Tq + i0) * width + h * hd;
          const T* d_o = dout + (b * Tq + i0) * out_width + h * hd;
          pack_block_transposed(qt.data(), q, width, rows, hd);
          pack_block_transposed(dot.data(), d_o, out_width, rows, hd);
          pack_rows(qp.data(), q, width, rows, hd);
          pack_rows(dop.data(), d_o, out_width, rows, hd);
          product(pt.data(), kRows, kp.data() + tile.lo * hp, hp, 1, qt.data(), kRows, span, kRows, hd, false);
          product(dst.data(), kRows, vp.data() + tile.lo * hp, hp, 1, dot.data(), kRows, span, kRows, hd, false);
          T row_lse[kRows] = {}, delta[kRows] = {};
          for (int64_t i = 0; i < rows; ++i) {
            row_lse[i] = lse[(b * L.n_head + h) * Tq + i0 + i];
            const T* o = out + (b * Tq + i0 + i) * out_width + h * hd;
            for (int64_t d = 0; d < hd; ++d) delta[i] += d_o[i * out_width + d] * o[d];
          }
          // P from the merged lse (0 where unseen and past the tile's rows), dS = scale P (dP - delta).
          for (int64_t j = 0; j < span; ++j) {
            T* p = pt.data() + j * kRows;
            T* ds = dst.data() + j * kRows;
            tile.mask(p, k_index[tile.lo + j], scale, minus_infinity);
#pragma omp simd
            for (int64_t i = 0; i < kRows; ++i) {
              p[i] = p[i] == minus_infinity ? T(0) : vexp(p[i] - row_lse[i]);
              ds[i] = scale * p[i] * (ds[i] - delta[i]);
            }
          }
          product(dv.data() + tile.lo * hp, hp, pt.data(), kRows, 1, dop.data(), hp, span, hp, rows, true);
          product(dq.data(), hp, dst.data(), 1, kRows, kp.data() + tile.lo * hp, hp, rows, hp, span, false);
          product(dk.data() + tile.lo * hp, hp, dst.data(), kRows, 1, qp.data(), hp, span, hp, rows, true);
          T* dq_rows = dqkv + (b * Tq + i0) * width + h * hd;
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t d = 0; d < hd; ++d) dq_rows[i * width + d] += dq[i * hp + d];
        }
      T* dk_rows = dkv + b * keys * kv_width + g * hd;
      for (int64_t j = 0; j < keys; ++j)
        for (int64_t d = 0; d < hd; ++d) {
          dk_rows[j * kv_width + d] += dk[j * hp + d];
          dk_rows[j * kv_width + v_at + d] += dv[j * hp + d];
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
