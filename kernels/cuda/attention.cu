// Causal grouped-query attention, flash-attention style (FlashAttention-2's algorithm), the
// twin of kernels/cpu/attention.cpp.
//
// Layout: qkv[B, T, (n_head + 2 n_kv_head) * D] holds per token all query heads, then the
// key heads, then the value heads; query head h reads kv head h / (n_head / n_kv_head).
// out[B, T, n_head * D]; lse[B, n_head, T] (float) is the log-sum-exp of each row of
// scale * q.k with scale = 1 / sqrt(D).
//
// Key starts (optional, [B, T]): query r attends to keys [key_starts[b, r], r] instead of
// [0, r], the mask of documents packed in one row. A K/V tile that no query of a query tile
// attends to (an earlier document's) is skipped by the whole block; inside the tiles that
// remain, the mask is per element.
//
// Kernels (all arithmetic in float; tiles are converted to float as they enter shared
// memory, rows padded to D + 1 floats so column walks hit distinct banks):
//   forward: one block per (query tile, head, batch); K/V tiles stream through shared
//     memory, an online softmax keeps the running max and sum per row, only lse is stored.
//   backward, three launches, deterministic (no atomics):
//     delta:  delta[b, h, t] = sum_d dO * O (one warp per row), into the workspace.
//     dq:     one block per (query tile, head, batch) loops over the K/V tiles up to the
//             diagonal, rebuilds P from q, k and lse, dS = P * (dO V^T - delta), dQ += dS K.
//     dk/dv:  one block per (kv tile, kv head, batch) loops over the query heads of its
//             group and, for each, over the query tiles from the diagonal on:
//             dV += P^T dO, dK += dS^T Q; the group sum happens in registers, in head order.
//
// Threads: 256 per block as a 16 x 16 grid, ty = threadIdx.x / 16, tx = threadIdx.x % 16.
// A thread owns the tile rows ty + 16 i and the columns tx + 16 j (score columns) or
// tx + 16 jj (head-dim columns). The 16 threads of one row are one half-warp, so row
// reductions are four xor-shuffles.
//
// Head dims: 32, 64, 80, 96 and 128 (any multiple of 16 works; each needs an instantiation
// in dispatch_head_dim). Others are rejected with kiln::Error. No alignment requirement on
// the pointers beyond the element type's own. These CUDA-core kernels run fp32 attention and
// whatever the tensor-core kernels (kernels/cuda/attention_tensor_core.cu) do not take:
// bf16/fp16 with head dim 64 or 128 and aligned tensors go there.
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

#include "base/check.h"
#include "kernels/cuda/attention_tensor_core.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Tile sizes (rows; multiples of 16) per head dim: smaller K/V (or Q) tiles for wide heads
// keep shared memory near 100 KB so two blocks fit on an SM.
template <int D>
struct Tiles {
  static constexpr int kForwardQ = 64, kForwardKV = D <= 64 ? 64 : 32;
  static constexpr int kDqQ = 64, kDqKV = D <= 64 ? 64 : 32;
  static constexpr int kDkvKV = 64, kDkvQ = D <= 64 ? 64 : 32;
};

constexpr size_t forward_smem_bytes(int D, int BQ, int BK) {
  return sizeof(float) * ((BQ + 2 * BK) * (D + 1) + BQ * (BK + 1));
}
constexpr size_t dq_smem_bytes(int D, int BQ, int BK) {
  return sizeof(float) * ((2 * BQ + 2 * BK) * (D + 1) + BQ * (BK + 1) + 2 * BQ);
}
constexpr size_t dkdv_smem_bytes(int D, int BK, int BQ) {
  return sizeof(float) * ((2 * BK + 2 * BQ) * (D + 1) + 2 * BK * (BQ + 1) + 2 * BQ);
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16(x);  // round to nearest even
  } else {
    return __float2half(x);
  }
}

// Reductions over the 16 threads of one tile row (one half-warp; all 32 lanes take part).
__device__ __forceinline__ float row_max(float v) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Copies rows [row0, row0 + ROWS) of one head (D contiguous elements per row, rows
// `stride` elements apart) into dst[ROWS][D + 1] as float; rows at or past seq become 0.
template <int ROWS, int D, typename T>
__device__ void load_tile(float* dst, const T* src, int64_t stride, int row0, int seq) {
  for (int idx = threadIdx.x; idx < ROWS * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    const int t = row0 + r;
    dst[r * (D + 1) + d] = t < seq ? to_float(src[t * stride + d]) : 0.f;
  }
}

// The first key query row r of batch row b attends to: its key start, or 0 without key starts
// and on the tile rows past the sequence.
__device__ __forceinline__ int key_start(const int32_t* key_starts, int b, int r,
                                         const AttentionDims& dims) {
  return key_starts && r < dims.seq ? key_starts[static_cast<int64_t>(b) * dims.seq + r] : 0;
}

// True, on every thread, when no query of the tile [q0, q0 + BQ) attends to any key of
// [k0, k0 + BK): each query's keys [start, r] miss it. A block-wide barrier: every thread
// of the block must call it.
template <int BQ, int BK>
__device__ bool tile_unseen(const int32_t* key_starts, int b, int q0, int k0, const AttentionDims& dims) {
  static_assert(BQ <= kThreads, "one thread per query row");
  const int r = q0 + static_cast<int>(threadIdx.x);
  const bool misses = threadIdx.x >= BQ || r >= dims.seq || r < k0 ||
                      key_start(key_starts, b, r, dims) >= k0 + BK;
  return __syncthreads_and(misses) != 0;
}

// dst[r] = src[row0 + r] * factor for the rows of a tile (0 past seq).
template <int ROWS>
__device__ void load_rows(float* dst, const float* src, int row0, int seq, float factor) {
  for (int r = threadIdx.x; r < ROWS; r += kThreads)
    dst[r] = row0 + r < seq ? src[row0 + r] * factor : 0.f;
}

// ---- forward ------------------------------------------------------------------------------

template <typename T, int D, int BQ, int BK>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(T* __restrict__ out, float* __restrict__ lse,
                             const T* __restrict__ qkv, const int32_t* __restrict__ key_starts,
                             AttentionDims dims, float scale_log2) {
  constexpr int RM = BQ / 16, CN = BK / 16, DN = D / 16, LD = D + 1, LP = BK + 1;
  extern __shared__ float smem[];
  float* q_s = smem;           // [BQ][LD]
  float* k_s = q_s + BQ * LD;  // [BK][LD]
  float* v_s = k_s + BK * LD;  // [BK][LD]
  float* p_s = v_s + BK * LD;  // [BQ][LP] probabilities of the current K/V tile

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * BQ;  // longest rows first
  const int h = blockIdx.y, b = blockIdx.z, g = h / dims.group;
  const T* base = qkv + static_cast<int64_t>(b) * dims.seq * dims.width;
  const T* k_head = base + (dims.n_head + g) * D;
  const T* v_head = base + (dims.n_head + dims.n_kv_head + g) * D;
  load_tile<BQ, D>(q_s, base + h * D, dims.width, q0, dims.seq);

  // Scores are kept in log2 units (scaled by scale * log2 e) so exp2f does the softmax.
  float o[RM][DN] = {}, m[RM], l[RM];
  int start[RM];  // the first key of each of this thread's rows
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
    start[i] = key_start(key_starts, b, q0 + ty + 16 * i, dims);
  }

  const int kv_end = min(dims.seq, q0 + BQ);
  for (int k0 = 0; k0 < kv_end; k0 += BK) {
    if (key_starts && tile_unseen<BQ, BK>(key_starts, b, q0, k0, dims)) continue;
    __syncthreads();  // the previous tile's readers are done with k_s, v_s, p_s
    load_tile<BK, D>(k_s, k_head, dims.width, k0, dims.seq);
    load_tile<BK, D>(v_s, v_head, dims.width, k0, dims.seq);
    __syncthreads();

    float s[RM][CN] = {};
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      float qa[RM], ka[CN];
#pragma unroll
      for (int i = 0; i < RM; ++i) qa[i] = q_s[(ty + 16 * i) * LD + d];
#pragma unroll
      for (int j = 0; j < CN; ++j) ka[j] = k_s[(tx + 16 * j) * LD + d];
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < CN; ++j) s[i][j] = fmaf(qa[i], ka[j], s[i][j]);
    }

    // Online softmax. A row whose keys all lie in later tiles (its start past this one) has
    // m_new = -inf here and adds nothing; 0 in place of its max keeps -inf - -inf out of the
    // exponents. Without key starts, key 0 is visible to every row and m_new is finite.
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int r = q0 + ty + 16 * i;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        const int c = k0 + tx + 16 * j;
        s[i][j] = c <= r && c >= start[i] ? s[i][j] * scale_log2 : -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      const float m_new = fmaxf(m[i], row_max(mx));
      const float m_shift = m_new == -INFINITY ? 0.f : m_new;
      const float correction = exp2f(m[i] - m_shift);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        const float p = exp2f(s[i][j] - m_shift);
        p_s[(ty + 16 * i) * LP + tx + 16 * j] = p;
        sum += p;
      }
      l[i] = l[i] * correction + row_sum(sum);
      m[i] = m_new;
#pragma unroll
      for (int jj = 0; jj < DN; ++jj) o[i][jj] *= correction;
    }
    __syncthreads();

    // O += P V over this tile.
#pragma unroll 4
    for (int c = 0; c < BK; ++c) {
      float va[DN];
#pragma unroll
      for (int jj = 0; jj < DN; ++jj) va[jj] = v_s[c * LD + tx + 16 * jj];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float p = p_s[(ty + 16 * i) * LP + c];
#pragma unroll
        for (int jj = 0; jj < DN; ++jj) o[i][jj] = fmaf(p, va[jj], o[i][jj]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = q0 + ty + 16 * i;
    if (r < dims.seq) {
      const float inv = 1.f / l[i];
      T* o_row = out + (static_cast<int64_t>(b) * dims.seq + r) * dims.out_width + h * D;
#pragma unroll
      for (int jj = 0; jj < DN; ++jj) o_row[tx + 16 * jj] = from_float<T>(o[i][jj] * inv);
      if (tx == 0)
        lse[(static_cast<int64_t>(b) * dims.n_head + h) * dims.seq + r] = m[i] * kLn2 + logf(l[i]);
    }
  }
}

// ---- backward -----------------------------------------------------------------------------

// delta[b, h, t] = sum_d dout * out over one head's row; one warp per (b, t, h) row. out and
// dout are [B * T * n_head, D] row-major.
template <typename T>
__global__ void attention_delta_kernel(float* __restrict__ delta, const T* __restrict__ dout,
                                       const T* __restrict__ out, AttentionDims dims, int head_dim,
                                       int64_t rows) {
  const int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (n >= rows) return;  // whole warps leave together
  const T* o = out + n * head_dim;
  const T* d_o = dout + n * head_dim;
  float sum = 0.f;
  for (int d = lane; d < head_dim; d += 32) sum = fmaf(to_float(d_o[d]), to_float(o[d]), sum);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) {
    const int64_t h = n % dims.n_head, bt = n / dims.n_head;
    const int64_t t = bt % dims.seq, b = bt / dims.seq;
    delta[(b * dims.n_head + h) * dims.seq + t] = sum;
  }
}

// dQ of one query tile of one head: loops over the K/V tiles up to the diagonal.
template <typename T, int D, int BQ, int BK>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dq_kernel(T* __restrict__ dqkv, const T* __restrict__ dout,
                                 const T* __restrict__ qkv, const float* __restrict__ lse,
                                 const float* __restrict__ delta,
                                 const int32_t* __restrict__ key_starts, AttentionDims dims,
                                 float scale_log2, float scale) {
  constexpr int RM = BQ / 16, CN = BK / 16, DN = D / 16, LD = D + 1, LP = BK + 1;
  extern __shared__ float smem[];
  float* q_s = smem;              // [BQ][LD]
  float* do_s = q_s + BQ * LD;    // [BQ][LD]
  float* k_s = do_s + BQ * LD;    // [BK][LD]
  float* v_s = k_s + BK * LD;     // [BK][LD]
  float* ds_s = v_s + BK * LD;    // [BQ][LP] dS of the current K/V tile
  float* lse_s = ds_s + BQ * LP;  // [BQ] lse in log2 units
  float* delta_s = lse_s + BQ;    // [BQ]

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * BQ;
  const int h = blockIdx.y, b = blockIdx.z, g = h / dims.group;
  const T* base = qkv + static_cast<int64_t>(b) * dims.seq * dims.width;
  const T* k_head = base + (dims.n_head + g) * D;
  const T* v_head = base + (dims.n_head + dims.n_kv_head + g) * D;
  const int64_t stats = (static_cast<int64_t>(b) * dims.n_head + h) * dims.seq;
  load_tile<BQ, D>(q_s, base + h * D, dims.width, q0, dims.seq);
  load_tile<BQ, D>(do_s, dout + static_cast<int64_t>(b) * dims.seq * dims.out_width + h * D,
                   dims.out_width, q0, dims.seq);
  load_rows<BQ>(lse_s, lse + stats, q0, dims.seq, kLog2e);
  load_rows<BQ>(delta_s, delta + stats, q0, dims.seq, 1.f);

  float dq[RM][DN] = {};
  int start[RM];  // the first key of each of this thread's rows
#pragma unroll
  for (int i = 0; i < RM; ++i) start[i] = key_start(key_starts, b, q0 + ty + 16 * i, dims);
  const int kv_end = min(dims.seq, q0 + BQ);
  for (int k0 = 0; k0 < kv_end; k0 += BK) {
    if (key_starts && tile_unseen<BQ, BK>(key_starts, b, q0, k0, dims)) continue;
    __syncthreads();  // the previous tile's readers are done with k_s, v_s, ds_s
    load_tile<BK, D>(k_s, k_head, dims.width, k0, dims.seq);
    load_tile<BK, D>(v_s, v_head, dims.width, k0, dims.seq);
    __syncthreads();

    // S = Q K^T and dP = dO V^T for this thread's (row, column) pairs.
    float s[RM][CN] = {}, dp[RM][CN] = {};
#pragma unroll 2
    for (int d = 0; d < D; ++d) {
      float qa[RM], oa[RM], ka[CN], va[CN];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        qa[i] = q_s[(ty + 16 * i) * LD + d];
        oa[i] = do_s[(ty + 16 * i) * LD + d];
      }
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        ka[j] = k_s[(tx + 16 * j) * LD + d];
        va[j] = v_s[(tx + 16 * j) * LD + d];
      }
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < CN; ++j) {
          s[i][j] = fmaf(qa[i], ka[j], s[i][j]);
          dp[i][j] = fmaf(oa[i], va[j], dp[i][j]);
        }
    }

    // dS = P * (dP - delta), P rebuilt from the saved lse; masked and padding rows give 0.
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int rl = ty + 16 * i, r = q0 + rl;
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        const int c = k0 + tx + 16 * j;
        const float p = (c <= r && c >= start[i] && r < dims.seq)
                            ? exp2f(s[i][j] * scale_log2 - lse_s[rl])
                            : 0.f;
        ds_s[rl * LP + tx + 16 * j] = p * (dp[i][j] - delta_s[rl]);
      }
    }
    __syncthreads();

    // dQ += dS K.
#pragma unroll 4
    for (int c = 0; c < BK; ++c) {
      float ka[DN];
#pragma unroll
      for (int jj = 0; jj < DN; ++jj) ka[jj] = k_s[c * LD + tx + 16 * jj];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float ds = ds_s[(ty + 16 * i) * LP + c];
#pragma unroll
        for (int jj = 0; jj < DN; ++jj) dq[i][jj] = fmaf(ds, ka[jj], dq[i][jj]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = q0 + ty + 16 * i;
    if (r < dims.seq) {
      T* dq_row = dqkv + (static_cast<int64_t>(b) * dims.seq + r) * dims.width + h * D;
#pragma unroll
      for (int jj = 0; jj < DN; ++jj) dq_row[tx + 16 * jj] = from_float<T>(dq[i][jj] * scale);
    }
  }
}

// dK and dV of one K/V tile of one kv head: loops over the group's query heads and, for
// each, over the query tiles that can see this tile (from the diagonal to the end).
template <typename T, int D, int BK, int BQ>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dkdv_kernel(T* __restrict__ dqkv, const T* __restrict__ dout,
                                   const T* __restrict__ qkv, const float* __restrict__ lse,
                                   const float* __restrict__ delta,
                                   const int32_t* __restrict__ key_starts, AttentionDims dims,
                                   float scale_log2, float scale) {
  constexpr int CM = BK / 16, RN = BQ / 16, DN = D / 16, LD = D + 1, LP = BQ + 1;
  extern __shared__ float smem[];
  float* k_s = smem;               // [BK][LD]
  float* v_s = k_s + BK * LD;      // [BK][LD]
  float* q_s = v_s + BK * LD;      // [BQ][LD]
  float* do_s = q_s + BQ * LD;     // [BQ][LD]
  float* pt_s = do_s + BQ * LD;    // [BK][LP] P^T of the current query tile
  float* dst_s = pt_s + BK * LP;   // [BK][LP] dS^T
  float* lse_s = dst_s + BK * LP;  // [BQ] lse in log2 units
  float* delta_s = lse_s + BQ;     // [BQ]

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int k0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * BK;
  const int g = blockIdx.y, b = blockIdx.z;
  const T* base = qkv + static_cast<int64_t>(b) * dims.seq * dims.width;
  const T* dout_base = dout + static_cast<int64_t>(b) * dims.seq * dims.out_width;
  load_tile<BK, D>(k_s, base + (dims.n_head + g) * D, dims.width, k0, dims.seq);
  load_tile<BK, D>(v_s, base + (dims.n_head + dims.n_kv_head + g) * D, dims.width, k0, dims.seq);

  float dk[CM][DN] = {}, dv[CM][DN] = {};
  for (int h = g * dims.group; h < (g + 1) * dims.group; ++h) {
    const int64_t stats = (static_cast<int64_t>(b) * dims.n_head + h) * dims.seq;
    for (int q0 = (k0 / BQ) * BQ; q0 < dims.seq; q0 += BQ) {
      if (key_starts && tile_unseen<BQ, BK>(key_starts, b, q0, k0, dims)) continue;
      __syncthreads();  // the previous tile's readers are done with q_s, do_s, pt_s, dst_s
      load_tile<BQ, D>(q_s, base + h * D, dims.width, q0, dims.seq);
      load_tile<BQ, D>(do_s, dout_base + h * D, dims.out_width, q0, dims.seq);
      load_rows<BQ>(lse_s, lse + stats, q0, dims.seq, kLog2e);
      load_rows<BQ>(delta_s, delta + stats, q0, dims.seq, 1.f);
      __syncthreads();

      // S^T = K Q^T and dP^T = V dO^T for this thread's (key row, query column) pairs.
      float s[CM][RN] = {}, dp[CM][RN] = {};
#pragma unroll 2
      for (int d = 0; d < D; ++d) {
        float ka[CM], va[CM], qa[RN], oa[RN];
#pragma unroll
        for (int i = 0; i < CM; ++i) {
          ka[i] = k_s[(ty + 16 * i) * LD + d];
          va[i] = v_s[(ty + 16 * i) * LD + d];
        }
#pragma unroll
        for (int j = 0; j < RN; ++j) {
          qa[j] = q_s[(tx + 16 * j) * LD + d];
          oa[j] = do_s[(tx + 16 * j) * LD + d];
        }
#pragma unroll
        for (int i = 0; i < CM; ++i)
#pragma unroll
          for (int j = 0; j < RN; ++j) {
            s[i][j] = fmaf(ka[i], qa[j], s[i][j]);
            dp[i][j] = fmaf(va[i], oa[j], dp[i][j]);
          }
      }

      // P^T and dS^T = P^T * (dP^T - delta); masked and padding rows give 0.
      int start[RN];  // the first key of each of this thread's query columns
#pragma unroll
      for (int j = 0; j < RN; ++j) start[j] = key_start(key_starts, b, q0 + tx + 16 * j, dims);
#pragma unroll
      for (int i = 0; i < CM; ++i) {
        const int c = k0 + ty + 16 * i;
#pragma unroll
        for (int j = 0; j < RN; ++j) {
          const int rl = tx + 16 * j, r = q0 + rl;
          const float p = (c <= r && c >= start[j] && r < dims.seq)
                              ? exp2f(s[i][j] * scale_log2 - lse_s[rl])
                              : 0.f;
          pt_s[(ty + 16 * i) * LP + rl] = p;
          dst_s[(ty + 16 * i) * LP + rl] = p * (dp[i][j] - delta_s[rl]);
        }
      }
      __syncthreads();

      // dV += P^T dO and dK += dS^T Q.
#pragma unroll 4
      for (int r = 0; r < BQ; ++r) {
        float qa[DN], oa[DN];
#pragma unroll
        for (int jj = 0; jj < DN; ++jj) {
          qa[jj] = q_s[r * LD + tx + 16 * jj];
          oa[jj] = do_s[r * LD + tx + 16 * jj];
        }
#pragma unroll
        for (int i = 0; i < CM; ++i) {
          const float p = pt_s[(ty + 16 * i) * LP + r];
          const float ds = dst_s[(ty + 16 * i) * LP + r];
#pragma unroll
          for (int jj = 0; jj < DN; ++jj) {
            dv[i][jj] = fmaf(p, oa[jj], dv[i][jj]);
            dk[i][jj] = fmaf(ds, qa[jj], dk[i][jj]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < CM; ++i) {
    const int c = k0 + ty + 16 * i;
    if (c < dims.seq) {
      T* row = dqkv + (static_cast<int64_t>(b) * dims.seq + c) * dims.width;
      T* dk_row = row + (dims.n_head + g) * D;
      T* dv_row = row + (dims.n_head + dims.n_kv_head + g) * D;
#pragma unroll
      for (int jj = 0; jj < DN; ++jj) {
        dk_row[tx + 16 * jj] = from_float<T>(dk[i][jj] * scale);
        dv_row[tx + 16 * jj] = from_float<T>(dv[i][jj]);
      }
    }
  }
}

// ---- host side ----------------------------------------------------------------------------

int ceil_div(int a, int b) { return (a + b - 1) / b; }


// Calls f(std::integral_constant<int, D>) for a supported head dim, fails otherwise.
template <typename F>
void dispatch_head_dim(int64_t head_dim, const char* op, F&& f) {
  switch (head_dim) {
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 80: f(std::integral_constant<int, 80>{}); break;
    case 96: f(std::integral_constant<int, 96>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    default:
      ::kiln::fail(std::string(op) + ": head_dim " + std::to_string(head_dim) +
                   " is not supported by the CUDA attention (supported: 32, 64, 80, 96, 128)");
  }
}

}  // namespace

AttentionDims attention_dims(const HeadLayout& L, const char* op) {
  const std::string where = std::string(op) + ": ";
  KILN_CHECK(L.batch >= 0 && L.seq >= 0, where + "negative batch or sequence length");
  KILN_CHECK(L.n_head > 0 && L.n_kv_head > 0 && L.n_head % L.n_kv_head == 0,
             where + "n_head (" + std::to_string(L.n_head) +
                 ") must be a positive multiple of n_kv_head (" + std::to_string(L.n_kv_head) +
                 ")");
  KILN_CHECK(L.seq <= INT_MAX / 2, where + "sequence length too long");
  KILN_CHECK(L.batch <= 65535 && L.n_head <= 65535, where + "batch and n_head must be <= 65535");
  AttentionDims d;
  d.seq = static_cast<int>(L.seq);
  d.n_head = static_cast<int>(L.n_head);
  d.n_kv_head = static_cast<int>(L.n_kv_head);
  d.group = d.n_head / d.n_kv_head;
  d.width = L.qkv_width();
  d.out_width = L.n_head * L.head_dim;
  return d;
}

template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, const int32_t* key_starts,
                       const HeadLayout& layout, cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float>) {
    if (tensor_core_attention_applies<T>(layout, {out, qkv}))
      return attention_forward_tensor_core(out, lse, qkv, key_starts, layout, stream);
  }
  const AttentionDims dims = attention_dims(layout, "attention_forward");
  dispatch_head_dim(layout.head_dim, "attention_forward", [&](auto head_dim) {
    constexpr int D = decltype(head_dim)::value;
    constexpr int BQ = Tiles<D>::kForwardQ, BK = Tiles<D>::kForwardKV;
    if (layout.batch == 0 || layout.seq == 0) return;
    const auto kernel = attention_forward_kernel<T, D, BQ, BK>;
    constexpr size_t smem = forward_smem_bytes(D, BQ, BK);
    allow_shared_memory(kernel, smem);
    const dim3 grid(ceil_div(dims.seq, BQ), dims.n_head, static_cast<unsigned>(layout.batch));
    kernel<<<grid, kThreads, smem, stream>>>(out, lse, qkv, key_starts, dims,
                                             attention_scale_log2(D));
    KILN_CUDA_CHECK_LAUNCH("attention_forward_kernel");
  });
}

size_t attention_backward_workspace_bytes(const HeadLayout& layout) {
  // delta[B, n_head, T] in float.
  return static_cast<size_t>(layout.batch * layout.n_head * layout.seq) * sizeof(float);
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse,
                        const int32_t* key_starts, const HeadLayout& layout, void* workspace,
                        cudaStream_t stream) {
  const AttentionDims dims = attention_dims(layout, "attention_backward");
  dispatch_head_dim(layout.head_dim, "attention_backward", [&](auto head_dim) {
    constexpr int D = decltype(head_dim)::value;
    if (layout.batch == 0 || layout.seq == 0) return;
    KILN_CHECK(workspace != nullptr, "attention_backward: workspace is null");
    float* delta = static_cast<float*>(workspace);
    const float scale_log2 = attention_scale_log2(D), scale = attention_scale(D);

    const int64_t rows = layout.batch * layout.seq * layout.n_head;
    constexpr int kRowsPerBlock = kThreads / 32;
    const int64_t delta_blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    KILN_CHECK(delta_blocks <= INT_MAX, "attention_backward: too many rows");
    attention_delta_kernel<T><<<static_cast<unsigned>(delta_blocks), kThreads, 0, stream>>>(
        delta, dout, out, dims, D, rows);
    KILN_CUDA_CHECK_LAUNCH("attention_delta_kernel");
    if constexpr (!std::is_same_v<T, float>) {
      if (tensor_core_attention_applies<T>(layout, {dqkv, dout, qkv}))
        return attention_backward_tensor_core(dqkv, dout, qkv, lse, delta, key_starts, layout,
                                              stream);
    }

    {
      constexpr int BQ = Tiles<D>::kDqQ, BK = Tiles<D>::kDqKV;
      const auto kernel = attention_backward_dq_kernel<T, D, BQ, BK>;
      constexpr size_t smem = dq_smem_bytes(D, BQ, BK);
      allow_shared_memory(kernel, smem);
      const dim3 grid(ceil_div(dims.seq, BQ), dims.n_head, static_cast<unsigned>(layout.batch));
      kernel<<<grid, kThreads, smem, stream>>>(dqkv, dout, qkv, lse, delta, key_starts, dims,
                                               scale_log2, scale);
      KILN_CUDA_CHECK_LAUNCH("attention_backward_dq_kernel");
    }
    {
      constexpr int BK = Tiles<D>::kDkvKV, BQ = Tiles<D>::kDkvQ;
      const auto kernel = attention_backward_dkdv_kernel<T, D, BK, BQ>;
      constexpr size_t smem = dkdv_smem_bytes(D, BK, BQ);
      allow_shared_memory(kernel, smem);
      const dim3 grid(ceil_div(dims.seq, BK), dims.n_kv_head, static_cast<unsigned>(layout.batch));
      kernel<<<grid, kThreads, smem, stream>>>(dqkv, dout, qkv, lse, delta, key_starts, dims,
                                               scale_log2, scale);
      KILN_CUDA_CHECK_LAUNCH("attention_backward_dkdv_kernel");
    }
  });
}

#define KILN_INSTANTIATE(T)                                                                    \
  template void attention_forward<T>(T*, float*, const T*, const int32_t*, const HeadLayout&,   \
                                     cudaStream_t);                                             \
  template void attention_backward<T>(T*, const T*, const T*, const T*, const float*,          \
                                      const int32_t*, const HeadLayout&, void*, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
