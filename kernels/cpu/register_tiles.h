// Register-tiled products and the row packing around them, shared by the CPU attention
// kernels (attention.cpp, ring_attention.cpp): GCC vector types at the target's width, so the
// same code builds for any target, and C = A B with a tile of C held in registers over the
// whole sum.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::cpu {

// The target's vector width, as a GCC vector type, so the same code builds for any target
// (16 bytes: SSE, NEON).
#if defined(__AVX512F__)
constexpr int64_t kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int64_t kVectorBytes = 32;
#else
constexpr int64_t kVectorBytes = 16;
#endif
template <typename T>
struct VectorOf {
  typedef T type __attribute__((vector_size(kVectorBytes)));
};
template <typename T>
using Vec = typename VectorOf<T>::type;
template <typename T>
constexpr int64_t kLanes = kVectorBytes / sizeof(T);

template <typename T>
Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void store(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename T>
int64_t padded(int64_t n) {
  return (n + kLanes<T> - 1) / kLanes<T> * kLanes<T>;
}

// Queries per block: one float vector, two double ones.
constexpr int64_t kRows = 16;
static_assert(kRows % kLanes<float> == 0 && kRows % kLanes<double> == 0);
// Rows of a register tile, each one or two vectors wide: 8 measured fastest with AVX-512
// (more rows run out of registers for the row addresses of A); AVX and SSE have half the
// vector registers.
constexpr int kTileRows = kVectorBytes == 64 ? 8 : 4;

// MR rows of NV vectors of C, held in registers over the whole sum. The loops over the
// tile are unrolled from the start, or GCC keeps the accumulators in memory across calls.
template <int MR, int NV, typename T>
void tile(T* C, int64_t ldc, const T* A, int64_t am, int64_t ak, const T* B, int64_t ldb,
          int64_t K, bool accumulate) {
  Vec<T> acc[MR][NV];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
      acc[m][v] = accumulate ? load(C + m * ldc + v * kLanes<T>) : Vec<T>{};
  for (int64_t k = 0; k < K; ++k) {
    Vec<T> b[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) b[v] = load(B + k * ldb + v * kLanes<T>);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const T a = A[m * am + k * ak];
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[m][v] += a * b[v];
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) store(C + m * ldc + v * kLanes<T>, acc[m][v]);
}

template <int NV, typename T>
void tile_column(T* C, int64_t ldc, const T* A, int64_t am, int64_t ak, const T* B, int64_t ldb,
                 int64_t M, int64_t K, bool accumulate) {
  int64_t m = 0;
  for (; m + kTileRows <= M; m += kTileRows)
    tile<kTileRows, NV>(C + m * ldc, ldc, A + m * am, am, ak, B, ldb, K, accumulate);
  for (; m < M; ++m) tile<1, NV>(C + m * ldc, ldc, A + m * am, am, ak, B, ldb, K, accumulate);
}

// C[M, N] = A B (+ C when accumulate), with A(m, k) = A[m * am + k * ak] (so A can be read
// transposed) and B[K, N] row-major; N is a whole number of vectors.
template <typename T>
void product(T* C, int64_t ldc, const T* A, int64_t am, int64_t ak, const T* B, int64_t ldb,
             int64_t M, int64_t N, int64_t K, bool accumulate) {
  int64_t n = 0;
  for (; n + 2 * kLanes<T> <= N; n += 2 * kLanes<T>)
    tile_column<2>(C + n, ldc, A, am, ak, B + n, ldb, M, K, accumulate);
  if (n < N) tile_column<1>(C + n, ldc, A, am, ak, B + n, ldb, M, K, accumulate);
}

// dst[n, padded(cols)] = src[n, cols] (row stride ld), zero-padded.
template <typename T>
void pack_rows(T* dst, const T* src, int64_t ld, int64_t n, int64_t cols) {
  const int64_t dw = padded<T>(cols);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t d = 0; d < cols; ++d) dst[j * dw + d] = src[j * ld + d];
    for (int64_t d = cols; d < dw; ++d) dst[j * dw + d] = T(0);
  }
}

// Asks the cache for rows [0, n) of cols values at stride ld, to be read or (kWrite)
// written. A task's operands lie a qkv row apart, a pattern the hardware prefetchers do not
// follow; so each task fetches the next one's, a block of rows at a time, and the next
// task finds them in cache (measured: a third off backward when they come from memory).
template <bool kWrite = false, typename T>
void prefetch_rows(const T* p, int64_t ld, int64_t n, int64_t cols) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < cols; d += 64 / static_cast<int64_t>(sizeof(T)))
      __builtin_prefetch(p + j * ld + d, kWrite);
}

// dst[cols, kRows] = src[n, cols]^T (row stride ld), columns n and on zero.
template <typename T>
void pack_block_transposed(T* dst, const T* src, int64_t ld, int64_t n, int64_t cols) {
  for (int64_t d = 0; d < cols; ++d)
    for (int64_t i = 0; i < kRows; ++i) dst[d * kRows + i] = i < n ? src[i * ld + d] : T(0);
}

// dst[n, cols] (row stride ld) = factor[j] * src[n, padded(cols)], factor = 1 when null.
template <typename T>
void unpack_rows(T* dst, int64_t ld, const T* src, int64_t n, int64_t cols,
                 const T* factor = nullptr) {
  const int64_t sw = padded<T>(cols);
  for (int64_t j = 0; j < n; ++j) {
    const T f = factor ? factor[j] : T(1);
    for (int64_t d = 0; d < cols; ++d) dst[j * ld + d] = f * src[j * sw + d];
  }
}

}  // namespace kiln::cpu
