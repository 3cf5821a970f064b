// Rotary position embedding and causal grouped-query attention.
//
// Attention works one head at a time, in blocks of kRows queries: block [r0, r1) meets keys
// [0, r1) only, which skips most of the masked upper triangle; with key starts (documents
// packed in a row), keys [first, r1) only, first the smallest start of the block's queries,
// which skips the earlier documents too. Its scores are held
// transposed, S^T = K Q^T with a row per key and a column per query, so the softmax reduces
// down columns, a vector of queries at a time, and never across a vector. Only the
// log-sum-exp of each query's scores is kept for backward, which rebuilds P from Q, K and
// it, as a flash-attention kernel does.
//
// At a head dim of 32 and a sequence of 128 each product is a few thousand multiply-adds,
// too small for BLAS, whose packing then costs as much as the product; they go through
// product() (register_tiles.h), a register-blocked kernel that reads its left operand in
// place and its right one with rows padded to whole vectors (K and V copied once per head,
// the block's Q and dO once per block).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <omp.h>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/register_tiles.h"

namespace kiln::cpu {

template <typename T>
void rope(T* qkv, const T* table, const int32_t* positions, const HeadLayout& L, bool inverse) {
  const int64_t width = L.qkv_width();
  const int64_t half = L.rope_dim / 2, first = L.head_dim - L.rope_dim;  // the turned tail
  const int64_t rotated_heads = L.n_head + L.n_kv_head;  // queries and keys; values stay
  const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < L.batch * L.seq; ++n) {
    const T* angles = table + position_of(positions, n, L.seq) * half * 2;
    for (int64_t h = 0; h < rotated_heads; ++h) {
      T* x = qkv + n * width + h * L.head_dim + first;
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

// Sets the causally masked entries of a block's S^T[r1, kRows] (key j > query r0 + i; all
// in rows r0 + 1 to r1 - 1) to value. Whole rows under a mask, which compile to one masked
// store per vector; the masks cannot go inside the exp loops, which GCC would then split at
// the diagonal into scalar tails.
template <typename T>
void mask_block(T* st, int64_t r0, int64_t r1, T value) {
  for (int64_t j = r0 + 1; j < r1; ++j) {
    T* row = st + j * kRows;
#pragma omp simd
    for (int64_t i = 0; i < kRows; ++i) row[i] = i < j - r0 ? value : row[i];
  }
}

// Where a block's queries [r0, r1) start attending, from the key starts of their row (null:
// every query starts at key 0). Keys before `first` are masked for every query, so the
// block's products begin there; keys in [first, last) are masked for some, by
// mask_before_starts.
template <typename T>
struct BlockStarts {
  int64_t first = 0, last = 0;
  T start[kRows] = {};  // in T, so the mask compares whole vectors; 0 past the block's rows
};

template <typename T>
BlockStarts<T> block_starts(const int32_t* key_starts, int64_t r0, int64_t r1) {
  BlockStarts<T> s;
  if (!key_starts) return s;
  s.first = r1;
  for (int64_t i = 0; i < r1 - r0; ++i) {
    const int64_t k = key_starts[r0 + i];
    s.start[i] = static_cast<T>(k);
    s.first = std::min(s.first, k);
    s.last = std::max(s.last, k);
  }
  return s;
}

// Sets the entries of S^T whose key comes before its query's start to value.
template <typename T>
void mask_before_starts(T* st, const BlockStarts<T>& s, T value) {
  for (int64_t j = s.first; j < s.last; ++j) {
    T* row = st + j * kRows;
    const T key = static_cast<T>(j);
#pragma omp simd
    for (int64_t i = 0; i < kRows; ++i) row[i] = key < s.start[i] ? value : row[i];
  }
}

// Per thread: backward's buffers (forward's fit in them), laid out in attention_backward.
template <typename T>
int64_t scratch_elements(int64_t seq, int64_t hd) {
  const int64_t hp = padded<T>(hd);
  return 4 * seq * hp + 2 * seq * kRows + 2 * hd * kRows + 3 * kRows * hp;
}

template <typename T>
T* thread_scratch(T* scratch, int64_t seq, int64_t hd) {
  const int64_t per_thread = static_cast<int64_t>(attention_scratch_bytes(seq, hd) / sizeof(T));
  return scratch + omp_get_thread_num() * per_thread;
}

}  // namespace

size_t attention_scratch_bytes(int64_t seq, int64_t head_dim) {
  const size_t f = static_cast<size_t>(scratch_elements<float>(seq, head_dim)) * sizeof(float);
  const size_t d = static_cast<size_t>(scratch_elements<double>(seq, head_dim)) * sizeof(double);
  return (std::max(f, d) + 63) / 64 * 64;
}

template <typename T>
void attention_forward(T* out, T* lse, const T* qkv, const int32_t* key_starts,
                       const HeadLayout& L, T* scratch) {
  const int64_t seq = L.seq, hd = L.head_dim, width = L.qkv_width();
  const int64_t out_width = L.n_head * hd;
  const int64_t group = L.n_head / L.n_kv_head;
  const int64_t hp = padded<T>(hd);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  // A static schedule gives each thread consecutive tasks, so it knows the next one's rows.
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < L.batch * L.n_head; ++bh) {
    const int64_t b = bh / L.n_head, h = bh % L.n_head, g = h / group;
    const int64_t next = std::min(bh + 1, L.batch * L.n_head - 1);
    const int64_t next_h = next % L.n_head, next_g = next_h / group;
    const T* next_base = qkv + next / L.n_head * seq * width;
    T* kp = thread_scratch(scratch, seq, hd);  // [seq, hp]: K
    T* vp = kp + seq * hp;                     // [seq, hp]: V
    T* st = vp + seq * hp;                     // [seq, kRows]: S^T, then exp(S - max)^T
    T* qt = st + seq * kRows;                  // [hd, kRows]: the block's Q^T
    T* o = qt + hd * kRows;                    // [kRows, hp]: its unnormalised output
    const T* base = qkv + b * seq * width;
    const int32_t* row_starts = key_starts ? key_starts + b * seq : nullptr;
    pack_rows(kp, base + (L.n_head + g) * hd, width, seq, hd);
    pack_rows(vp, base + (L.n_head + L.n_kv_head + g) * hd, width, seq, hd);
    for (int64_t r0 = 0; r0 < seq; r0 += kRows) {
      const int64_t r1 = std::min(seq, r0 + kRows), rows = r1 - r0;
      for (int64_t head : {next_h, L.n_head + next_g, L.n_head + L.n_kv_head + next_g})
        prefetch_rows(next_base + r0 * width + head * hd, width, rows, hd);
      const BlockStarts<T> starts = block_starts<T>(row_starts, r0, r1);
      const int64_t j0 = starts.first;
      pack_block_transposed(qt, base + r0 * width + h * hd, width, rows, hd);
      product(st + j0 * kRows, kRows, kp + j0 * hp, hp, 1, qt, kRows, r1 - j0, kRows, hd, false);
      mask_block(st, r0, r1, -std::numeric_limits<T>::infinity());
      mask_before_starts(st, starts, -std::numeric_limits<T>::infinity());
      T mx[kRows], sum[kRows];
      std::fill(mx, mx + kRows, -std::numeric_limits<T>::infinity());
      std::fill(sum, sum + kRows, T(0));
      for (int64_t j = j0; j < r1; ++j) {
        const T* row = st + j * kRows;
#pragma omp simd
        for (int64_t i = 0; i < kRows; ++i) mx[i] = mx[i] > row[i] ? mx[i] : row[i];
      }
      for (int64_t j = j0; j < r1; ++j) {
        T* row = st + j * kRows;
#pragma omp simd
        for (int64_t i = 0; i < kRows; ++i) {
          row[i] = vexp(scale * (row[i] - mx[i]));
          sum[i] += row[i];
        }
      }
      mask_block(st, r0, r1, T(0));  // exp of the -inf above, which vexp clamps
      mask_before_starts(st, starts, T(0));
      T inverse_sum[kRows];
      for (int64_t i = 0; i < rows; ++i) {
        lse[bh * seq + r0 + i] = scale * mx[i] + std::log(sum[i]);
        inverse_sum[i] = T(1) / sum[i];
      }
      product(o, hp, st + j0 * kRows, 1, kRows, vp + j0 * hp, hp, rows, hp, r1 - j0, false);
      unpack_rows(out + (b * seq + r0) * out_width + h * hd, out_width, o, rows, hd, inverse_sum);
    }
  }
}

// One task per (batch, key/value head): the query heads that share a key/value head add
// into the same dK and dV, so they run in the same task, in head order. Scheduled and
// prefetched as forward.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                        const int32_t* key_starts, const HeadLayout& L, T* scratch) {
  const int64_t seq = L.seq, hd = L.head_dim, width = L.qkv_width();
  const int64_t out_width = L.n_head * hd;
  const int64_t group = L.n_head / L.n_kv_head;
  const int64_t hp = padded<T>(hd);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel for schedule(static)
  for (int64_t bg = 0; bg < L.batch * L.n_kv_head; ++bg) {
    const int64_t b = bg / L.n_kv_head, g = bg % L.n_kv_head;
    const int64_t next = std::min(bg + 1, L.batch * L.n_kv_head - 1);
    const int64_t next_row = next / L.n_kv_head * seq, next_g = next % L.n_kv_head;
    const int64_t next_q = next_g * group * hd;  // its query heads, in qkv, out and dout
    const int64_t next_k = (L.n_head + next_g) * hd, next_v = (L.n_head + L.n_kv_head + next_g) * hd;
    T* kp = thread_scratch(scratch, seq, hd);  // [seq, hp]: K
    T* vp = kp + seq * hp;                     // [seq, hp]: V
    T* dk = vp + seq * hp;                     // [seq, hp]: dK, summed over the group's heads
    T* dv = dk + seq * hp;                     // [seq, hp]: dV, the same
    T* pt = dv + seq * hp;                     // [seq, kRows]: the block's S^T, then P^T
    T* dst = pt + seq * kRows;                 // [seq, kRows]: its dP^T, then scale * dS^T
    T* qt = dst + seq * kRows;                 // [hd, kRows]: its Q^T
    T* dot = qt + hd * kRows;                  // [hd, kRows]: its dO^T
    T* qp = dot + hd * kRows;                  // [kRows, hp]: its Q
    T* dop = qp + kRows * hp;                  // [kRows, hp]: its dO
    T* dq = dop + kRows * hp;                  // [kRows, hp]: its dQ
    const T* base = qkv + b * seq * width;
    const int32_t* row_starts = key_starts ? key_starts + b * seq : nullptr;
    T* dbase = dqkv + b * seq * width;
    pack_rows(kp, base + (L.n_head + g) * hd, width, seq, hd);
    pack_rows(vp, base + (L.n_head + L.n_kv_head + g) * hd, width, seq, hd);
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const T* o = out + b * seq * out_width + h * hd;
      const T* d_o = dout + b * seq * out_width + h * hd;
      // Last block first: it meets every key (from its first start on), so there the
      // group's first head writes dK and dV rather than adding to zeros.
      for (int64_t r0 = (seq - 1) / kRows * kRows; r0 >= 0; r0 -= kRows) {
        const int64_t r1 = std::min(seq, r0 + kRows), rows = r1 - r0;
        const bool accumulate = h > g * group || r1 < seq;
        const T* q = base + r0 * width + h * hd;
        if (h == g * group) {
          const int64_t row = next_row + r0;
          prefetch_rows(out + row * out_width + next_q, out_width, rows, group * hd);
          prefetch_rows(dout + row * out_width + next_q, out_width, rows, group * hd);
          for (int64_t column : {next_q, next_k, next_v}) {
            const int64_t cols = column == next_q ? group * hd : hd;
            prefetch_rows(qkv + row * width + column, width, rows, cols);
            prefetch_rows<true>(dqkv + row * width + column, width, rows, cols);
          }
        }
        const BlockStarts<T> starts = block_starts<T>(row_starts, r0, r1);
        const int64_t j0 = starts.first;
        // The pass that writes dK and dV covers keys [j0, seq): the ones before start at 0.
        if (!accumulate) {
          std::fill(dk, dk + j0 * hp, T(0));
          std::fill(dv, dv + j0 * hp, T(0));
        }
        pack_block_transposed(qt, q, width, rows, hd);
        pack_block_transposed(dot, d_o + r0 * out_width, out_width, rows, hd);
        pack_rows(qp, q, width, rows, hd);
        pack_rows(dop, d_o + r0 * out_width, out_width, rows, hd);
        product(pt + j0 * kRows, kRows, kp + j0 * hp, hp, 1, qt, kRows, r1 - j0, kRows, hd, false);
        product(dst + j0 * kRows, kRows, vp + j0 * hp, hp, 1, dot, kRows, r1 - j0, kRows, hd,
                false);
        // Columns past the block's rows are padding: lse and delta 0 there.
        T row_lse[kRows] = {}, delta[kRows] = {};
        for (int64_t i = 0; i < rows; ++i) {
          row_lse[i] = lse[(b * L.n_head + h) * seq + r0 + i];
          T sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t d = 0; d < hd; ++d)
            sum += d_o[(r0 + i) * out_width + d] * o[(r0 + i) * out_width + d];
          delta[i] = sum;
        }
        // P = exp(scale * S - lse) and the softmax backward dS = P * (dP - rowsum(dO * O)),
        // with the scale of S folded in.
        for (int64_t j = j0; j < r1; ++j) {
          T* p_row = pt + j * kRows;
          T* ds_row = dst + j * kRows;
#pragma omp simd
          for (int64_t i = 0; i < kRows; ++i) {
            p_row[i] = vexp(scale * p_row[i] - row_lse[i]);
            ds_row[i] = scale * p_row[i] * (ds_row[i] - delta[i]);
          }
        }
        mask_block(pt, r0, r1, T(0));
        mask_block(dst, r0, r1, T(0));
        mask_before_starts(pt, starts, T(0));
        mask_before_starts(dst, starts, T(0));
        // dV[j0, r1) += P^T dO, dQ = dS K and dK[j0, r1) += dS^T Q.
        product(dv + j0 * hp, hp, pt + j0 * kRows, kRows, 1, dop, hp, r1 - j0, hp, rows,
                accumulate);
        product(dq, hp, dst + j0 * kRows, 1, kRows, kp + j0 * hp, hp, rows, hp, r1 - j0, false);
        product(dk + j0 * hp, hp, dst + j0 * kRows, kRows, 1, qp, hp, r1 - j0, hp, rows,
                accumulate);
        unpack_rows(dbase + r0 * width + h * hd, width, dq, rows, hd);
      }
    }
    unpack_rows(dbase + (L.n_head + g) * hd, width, dk, seq, hd);
    unpack_rows(dbase + (L.n_head + L.n_kv_head + g) * hd, width, dv, seq, hd);
  }
}

#define KILN_INSTANTIATE(T)                                                                  \
  template void rope<T>(T*, const T*, const int32_t*, const HeadLayout&, bool);              \
  template void attention_forward<T>(T*, T*, const T*, const int32_t*, const HeadLayout&, T*); \
  template void attention_backward<T>(T*, const T*, const T*, const T*, const T*,            \
                                      const int32_t*, const HeadLayout&, T*);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
#undef KILN_INSTANTIATE

}  // namespace kiln::cpu
