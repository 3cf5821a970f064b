// Causal grouped-query attention on the tensor cores: mma.sync m16n8k16 with bf16 or fp16
// operands and float accumulators, FlashAttention-2's algorithm. The same function as the
// CUDA-core kernels of kernels/cuda/attention.cu (layout, key starts, lse) and as the CPU
// twin kernels/cpu/attention.cpp; kernels/cuda/ops_cuda_test.cpp holds it to the CPU.
//
// Blocks of 4 warps. Tiles of 64 query rows and 64 keys (the dk/dv query tile is QueryTile);
// each warp owns 16 rows of its block's tile (query rows in forward and dq, key rows in dk/dv).
// Tiles are copied into shared memory with 16-byte loads, each row padded by 8 elements so
// the 8 row addresses of one ldmatrix fall in distinct banks. Operands come from ldmatrix;
// .trans where the product's k dimension runs along the tile's rows (P V, dS K, dS^T Q, P^T dO).
//
// The score accumulators of two neighbouring 8-column tiles hold exactly the A operand of
// one 16-wide k step of the next product, so P and dS pass from accumulators to operands in
// registers, rounded to T there as FlashAttention-2 does; dS itself is formed in float.
//
// forward: one block per (query tile, head, batch), the longest rows first: S = Q K^T,
//   online softmax in the log2 domain, O += P V; stores O and lse.
// backward, deterministic (no atomics), after attention.cu's delta kernel:
//   dq:   one block per (query tile, head, batch): S and dP = dO V^T rebuilt per key tile,
//         dS = P (dP - delta), dQ += dS K, over the key tiles up to the diagonal.
//   dkdv: one block per (key tile, kv head, batch), over the query heads of its group and
//         their query tiles from the diagonal on: S^T = K Q^T, dV += P^T dO, dP^T = V dO^T,
//         dK += dS^T Q; the group's sum stays in registers, in head order.
#include <climits>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/attention_tensor_core.cuh"
#include "kernels/cuda/cuda_check.h"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = 64;  // query rows of forward and dq tiles; keys of every key tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Elements per shared-memory row: D plus 16 bytes of padding.
template <int D>
constexpr int kStride = D + 8;

// The dk/dv query tile. 32 rows keep the per-thread scores and their gradient at 32
// registers beside the dK and dV accumulators (D / 2 registers each).
template <int D>
constexpr int kQueryTile = 32;

// Blocks an SM must hold at once, which caps each thread at 65536 / (128 x blocks) registers:
// at head dim 64, 4 backward blocks (128 registers) and 3 forward ones (168; at 128 its
// online-softmax state spills); at head dim 128 the accumulators alone take 128, so 2.
template <int D>
constexpr int kForwardMinBlocks = D <= 64 ? 3 : 2;
template <int D>
constexpr int kBackwardMinBlocks = D <= 64 ? 4 : 2;

// Elements of one kTile-row tile in shared memory.
template <int D>
constexpr int kTileElements = kTile * kStride<D>;

template <typename T, int D>
constexpr size_t tile_bytes(int rows) {
  return sizeof(T) * static_cast<size_t>(rows) * kStride<D>;
}

template <typename T>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// c += a b for one 16 x 8 tile: a the 16 x 16 A operand, (b0, b1) the 16 x 8 B operand.
template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ void ldmatrix(uint32_t (&r)[4], const void* p) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_trans(uint32_t (&r)[4], const void* p) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Lane roles in the fragments: an accumulator element c of tile j sits at row
// lane / 4 + 8 (c / 2) and column 8 j + 2 (lane % 4) + c % 2.
__device__ __forceinline__ int lane_row(int c) { return threadIdx.x % 32 / 4 + 8 * (c / 2); }
__device__ __forceinline__ int lane_column(int j, int c) {
  return 8 * j + 2 * (threadIdx.x % 4) + c % 2;
}

// acc[N / 8] += A B^T: A the 16 rows of tile a from row a0, B the N rows of tile b from
// row b0, both stored [row][D].
template <typename T, int D, int N>
__device__ __forceinline__ void multiply_abt(float (&acc)[N / 8][4], const T* a, int a0,
                                             const T* b, int b0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < D; k += 16) {
    uint32_t af[4];
    ldmatrix(af, a + (a0 + lane % 16) * kStride<D> + k + lane / 16 * 8);
#pragma unroll
    for (int n = 0; n < N; n += 16) {
      uint32_t bf[4];  // [0], [1]: columns n..n+7; [2], [3]: n+8..n+15
      ldmatrix(bf, b + (b0 + n + lane % 8 + lane / 16 * 8) * kStride<D> + k + lane / 8 % 2 * 8);
      mma<T>(acc[n / 8], af, bf[0], bf[1]);
      mma<T>(acc[n / 8 + 1], af, bf[2], bf[3]);
    }
  }
}

// acc[D / 8] += P B: P a 16 x N product still in accumulator form, B the N rows of tile b
// from row b0, stored [row][D].
template <typename T, int D, int N>
__device__ __forceinline__ void multiply_pb(float (&acc)[D / 8][4], const float (&p)[N / 8][4],
                                            const T* b, int b0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < N; k += 16) {
    const float(&lo)[4] = p[k / 8];
    const float(&hi)[4] = p[k / 8 + 1];
    const uint32_t af[4] = {pack<T>(lo[0], lo[1]), pack<T>(lo[2], lo[3]), pack<T>(hi[0], hi[1]),
                            pack<T>(hi[2], hi[3])};
#pragma unroll
    for (int n = 0; n < D; n += 16) {
      uint32_t bf[4];
      ldmatrix_trans(bf, b + (b0 + k + lane % 8 + lane / 8 % 2 * 8) * kStride<D> + n + lane / 16 * 8);
      mma<T>(acc[n / 8], af, bf[0], bf[1]);
      mma<T>(acc[n / 8 + 1], af, bf[2], bf[3]);
    }
  }
}

// Starts copying rows [row0, row0 + ROWS) of one head (D elements each, `stride` elements
// apart) into a padded shared tile with cp.async, 16 bytes per thread and copy; rows at or
// past seq are filled with 0. The copy lands once a later wait_copies says so.
template <int ROWS, int D, typename T>
__device__ void copy_tile(T* tile, const T* src, int64_t stride, int row0, int seq) {
  constexpr int kVectors = D / 8;
  for (int i = threadIdx.x; i < ROWS * kVectors; i += kThreads) {
    const int r = i / kVectors, c = i % kVectors * 8;
    const bool inside = row0 + r < seq;
    const T* from = inside ? src + (row0 + r) * stride + c : src;
    const auto to = static_cast<uint32_t>(__cvta_generic_to_shared(tile + r * kStride<D> + c));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from),
                 "r"(inside ? 16 : 0));
  }
}

// Closes the group of copies started since the last call (an empty group is fine).
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n"); }

// Waits until at most `pending` of this thread's copy groups are still in flight; a barrier
// after it makes every thread's copies visible to the block.
template <int pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The first key query row r attends to (0 without key starts or past the sequence).
__device__ __forceinline__ int first_key(const int32_t* key_starts, int b, int r,
                                         const AttentionDims& dims) {
  return key_starts && r < dims.seq ? key_starts[static_cast<int64_t>(b) * dims.seq + r] : 0;
}

// The first key any of the block's rows attends to, given this thread's two rows. A
// block-wide barrier: every thread calls it.
__device__ int block_first_key(const int (&start)[2], const int (&row)[2], int seq) {
  __shared__ int warp_first[kWarps];
  int first = INT_MAX;
  for (int i = 0; i < 2; ++i)
    if (row[i] < seq) first = min(first, start[i]);
  first = __reduce_min_sync(0xffffffffu, first);
  if (threadIdx.x % 32 == 0) warp_first[threadIdx.x / 32] = first;
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) first = min(first, warp_first[w]);
  return first;
}

// Writes this thread's two rows of a 16 x D accumulator times `factor` into rows `row` of
// dst (row stride `stride` elements), skipping rows at or past seq.
template <typename T, int D>
__device__ void store_rows(T* dst, int64_t stride, const float (&acc)[D / 8][4],
                           const int (&row)[2], const float (&factor)[2], int seq) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (row[i] >= seq) continue;
    T* out = dst + row[i] * stride;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<uint32_t*>(out + lane_column(j, 2 * i)) =
          pack<T>(acc[j][2 * i] * factor[i], acc[j][2 * i + 1] * factor[i]);
  }
}

// ---- forward ------------------------------------------------------------------------------

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, kForwardMinBlocks<D>)
    forward_kernel(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv,
                   const int32_t* __restrict__ key_starts, AttentionDims dims, float scale_log2) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);
  // K and V double-buffered: buffer n of K at sk + n * kTileElements, V after both.
  T* sk = sq + kTileElements<D>;
  T* sv = sk + 2 * kTileElements<D>;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTile;
  const int h = blockIdx.y, b = blockIdx.z, kv = h / dims.group, warp = threadIdx.x / 32;
  const T* rows = qkv + static_cast<int64_t>(b) * dims.seq * dims.width;
  const T* k_src = rows + static_cast<int64_t>(dims.n_head + kv) * D;
  const T* v_src = rows + static_cast<int64_t>(dims.n_head + dims.n_kv_head + kv) * D;
  copy_tile<kTile, D>(sq, rows + static_cast<int64_t>(h) * D, dims.width, q0, dims.seq);

  const int row[2] = {q0 + 16 * warp + lane_row(0), q0 + 16 * warp + lane_row(2)};
  const int start[2] = {first_key(key_starts, b, row[0], dims),
                        first_key(key_starts, b, row[1], dims)};
  const int first = block_first_key(start, row, dims.seq) / kTile * kTile;
  const int last = min(q0 + kTile, dims.seq) - 1;  // the last key any row of the tile sees
  copy_tile<kTile, D>(sk, k_src, dims.width, first, dims.seq);
  copy_tile<kTile, D>(sv, v_src, dims.width, first, dims.seq);
  commit_copies();

  float o[D / 8][4] = {};
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.f, 0.f};
  for (int k0 = first, n = 0; k0 <= last; k0 += kTile, ++n) {
    const int now = n % 2;
    if (k0 + kTile <= last) {  // the next tiles load while this one is computed
      copy_tile<kTile, D>(sk + (1 - now) * kTileElements<D>, k_src, dims.width, k0 + kTile, dims.seq);
      copy_tile<kTile, D>(sv + (1 - now) * kTileElements<D>, v_src, dims.width, k0 + kTile, dims.seq);
    }
    commit_copies();
    wait_copies<1>();
    __syncthreads();
    float s[kTile / 8][4] = {};
    multiply_abt<T, D, kTile>(s, sq, 16 * warp, sk + now * kTileElements<D>, 0);
    const bool masked = key_starts != nullptr || k0 + kTile - 1 > q0 + 16 * warp;
#pragma unroll
    for (int j = 0; j < kTile / 8; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int key = k0 + lane_column(j, c), i = c / 2;
        s[j][c] = masked && (key > row[i] || key < start[i]) ? -INFINITY : s[j][c] * scale_log2;
      }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kTile / 8; ++j)
        tile_max = fmaxf(tile_max, fmaxf(s[j][2 * i], s[j][2 * i + 1]));
      const float new_max = fmaxf(running_max[i], quad_max(tile_max));
      // A row with no key seen yet keeps everything at 0 instead of exp2(-inf + inf).
      const float base = new_max == -INFINITY ? 0.f : new_max;
      const float rescale = exp2f(running_max[i] - base);
      running_max[i] = new_max;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kTile / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[j][2 * i + e] = exp2f(s[j][2 * i + e] - base);
          sum += s[j][2 * i + e];
        }
      running_sum[i] = running_sum[i] * rescale + sum;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        o[j][2 * i] *= rescale;
        o[j][2 * i + 1] *= rescale;
      }
    }
    multiply_pb<T, D, kTile>(o, s, sv + now * kTileElements<D>, 0);
    __syncthreads();  // this tile's buffers are free for the copies two tiles on
  }

  float inverse[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float sum = quad_sum(running_sum[i]);
    inverse[i] = 1.f / sum;
    if (row[i] < dims.seq && threadIdx.x % 4 == 0)
      lse[(static_cast<int64_t>(b) * dims.n_head + h) * dims.seq + row[i]] =
          (running_max[i] + log2f(sum)) * kLn2;
  }
  store_rows<T, D>(out + static_cast<int64_t>(b) * dims.seq * dims.out_width +
                       static_cast<int64_t>(h) * D,
                   dims.out_width, o, row, inverse, dims.seq);
}

// ---- backward -----------------------------------------------------------------------------

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, kBackwardMinBlocks<D>)
    dq_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
              const float* __restrict__ lse, const float* __restrict__ delta,
              const int32_t* __restrict__ key_starts, AttentionDims dims, float scale_log2,
              float scale) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);
  T* sdo = sq + kTile * kStride<D>;
  T* sk = sdo + kTileElements<D>;  // double-buffered as in forward
  T* sv = sk + 2 * kTileElements<D>;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTile;
  const int h = blockIdx.y, b = blockIdx.z, kv = h / dims.group, warp = threadIdx.x / 32;
  const int64_t token0 = static_cast<int64_t>(b) * dims.seq;
  const T* rows = qkv + token0 * dims.width;
  const T* k_src = rows + static_cast<int64_t>(dims.n_head + kv) * D;
  const T* v_src = rows + static_cast<int64_t>(dims.n_head + dims.n_kv_head + kv) * D;
  copy_tile<kTile, D>(sq, rows + static_cast<int64_t>(h) * D, dims.width, q0, dims.seq);
  copy_tile<kTile, D>(sdo, dout + token0 * dims.out_width + static_cast<int64_t>(h) * D,
                      dims.out_width, q0, dims.seq);

  const int row[2] = {q0 + 16 * warp + lane_row(0), q0 + 16 * warp + lane_row(2)};
  const int start[2] = {first_key(key_starts, b, row[0], dims),
                        first_key(key_starts, b, row[1], dims)};
  float row_lse[2], row_delta[2];  // lse in log2 units; +inf past seq makes P 0 there
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t at = (static_cast<int64_t>(b) * dims.n_head + h) * dims.seq + row[i];
    row_lse[i] = row[i] < dims.seq ? lse[at] * kLog2e : INFINITY;
    row_delta[i] = row[i] < dims.seq ? delta[at] : 0.f;
  }
  const int first = block_first_key(start, row, dims.seq) / kTile * kTile;
  const int last = min(q0 + kTile, dims.seq) - 1;
  copy_tile<kTile, D>(sk, k_src, dims.width, first, dims.seq);
  copy_tile<kTile, D>(sv, v_src, dims.width, first, dims.seq);
  commit_copies();

  float dq[D / 8][4] = {};
  for (int k0 = first, n = 0; k0 <= last; k0 += kTile, ++n) {
    const int now = n % 2;
    if (k0 + kTile <= last) {
      copy_tile<kTile, D>(sk + (1 - now) * kTileElements<D>, k_src, dims.width, k0 + kTile, dims.seq);
      copy_tile<kTile, D>(sv + (1 - now) * kTileElements<D>, v_src, dims.width, k0 + kTile, dims.seq);
    }
    commit_copies();
    wait_copies<1>();
    __syncthreads();
    float s[kTile / 8][4] = {}, dp[kTile / 8][4] = {};
    multiply_abt<T, D, kTile>(s, sq, 16 * warp, sk + now * kTileElements<D>, 0);
    multiply_abt<T, D, kTile>(dp, sdo, 16 * warp, sv + now * kTileElements<D>, 0);
    const bool masked = key_starts != nullptr || k0 + kTile - 1 > q0 + 16 * warp;
#pragma unroll
    for (int j = 0; j < kTile / 8; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int key = k0 + lane_column(j, c), i = c / 2;
        const float p = masked && (key > row[i] || key < start[i])
                            ? 0.f
                            : exp2f(s[j][c] * scale_log2 - row_lse[i]);
        s[j][c] = p * (dp[j][c] - row_delta[i]);
      }
    multiply_pb<T, D, kTile>(dq, s, sk + now * kTileElements<D>, 0);
    __syncthreads();
  }
  const float factor[2] = {scale, scale};
  store_rows<T, D>(dqkv + token0 * dims.width + static_cast<int64_t>(h) * D, dims.width, dq, row,
                   factor, dims.seq);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, kBackwardMinBlocks<D>)
    dkdv_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                const float* __restrict__ lse, const float* __restrict__ delta,
                const int32_t* __restrict__ key_starts, AttentionDims dims, float scale_log2,
                float scale) {
  constexpr int QT = kQueryTile<D>;
  extern __shared__ __align__(16) unsigned char smem[];
  T* sk = reinterpret_cast<T*>(smem);
  T* sv = sk + kTile * kStride<D>;
  // Q and dO double-buffered: buffer n of Q at sq + n * QT * kStride<D>, dO after both.
  T* sq = sv + kTileElements<D>;
  T* sdo = sq + 2 * QT * kStride<D>;
  // Per query of a tile, double-buffered too: lse in log2 units, delta, first key.
  float* query_lse = reinterpret_cast<float*>(sdo + 2 * QT * kStride<D>);
  float* query_delta = query_lse + 2 * QT;
  int* query_start = reinterpret_cast<int*>(query_delta + 2 * QT);
  const int k0 = blockIdx.x * kTile;  // the first key tiles have the most work: launched first
  const int kv = blockIdx.y, b = blockIdx.z, warp = threadIdx.x / 32;
  const int64_t token0 = static_cast<int64_t>(b) * dims.seq;
  const T* rows = qkv + token0 * dims.width;
  copy_tile<kTile, D>(sk, rows + static_cast<int64_t>(dims.n_head + kv) * D, dims.width, k0,
                      dims.seq);
  copy_tile<kTile, D>(sv, rows + static_cast<int64_t>(dims.n_head + dims.n_kv_head + kv) * D,
                      dims.width, k0, dims.seq);
  const int key[2] = {k0 + 16 * warp + lane_row(0), k0 + 16 * warp + lane_row(2)};

  // Step i takes query head kv * group + i / per_head and its query tile from q_begin on.
  const int q_begin = k0 / QT * QT, per_head = (dims.seq - q_begin + QT - 1) / QT;
  const int steps = dims.group * per_head;
  const auto head = [&](int i) { return kv * dims.group + i / per_head; };
  const auto tile_start = [&](int i) { return q_begin + i % per_head * QT; };
  const auto load = [&](int i, int into) {
    const int h = head(i), q0 = tile_start(i);
    copy_tile<QT, D>(sq + into * QT * kStride<D>, rows + static_cast<int64_t>(h) * D, dims.width, q0, dims.seq);
    copy_tile<QT, D>(sdo + into * QT * kStride<D>, dout + token0 * dims.out_width + static_cast<int64_t>(h) * D,
                     dims.out_width, q0, dims.seq);
    const int q = q0 + static_cast<int>(threadIdx.x);
    if (threadIdx.x < QT) {
      const int64_t at = (static_cast<int64_t>(b) * dims.n_head + h) * dims.seq + q;
      const bool inside = q < dims.seq;
      query_lse[into * QT + threadIdx.x] = inside ? lse[at] * kLog2e : INFINITY;
      query_delta[into * QT + threadIdx.x] = inside ? delta[at] : 0.f;
      query_start[into * QT + threadIdx.x] = first_key(key_starts, b, q, dims);
    }
  };
  load(0, 0);
  commit_copies();

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  for (int i = 0; i < steps; ++i) {
    const int now = i % 2, q0 = tile_start(i);
    if (i + 1 < steps) load(i + 1, 1 - now);
    commit_copies();
    wait_copies<1>();
    // Also the barrier that makes the copies visible: skip query tiles whose queries all
    // start past this key tile (another document's), or all come before it.
    const int q = q0 + static_cast<int>(threadIdx.x);
    const bool unseen = threadIdx.x >= QT || q >= dims.seq || q < k0 ||
                        first_key(key_starts, b, q, dims) >= k0 + kTile;
    if (__syncthreads_and(unseen)) continue;
    const float* lse_now = query_lse + now * QT;
    const float* delta_now = query_delta + now * QT;
    const int* start_now = query_start + now * QT;

    float st[QT / 8][4] = {};  // S^T, then P^T, then dS^T
    multiply_abt<T, D, QT>(st, sk, 16 * warp, sq + now * QT * kStride<D>, 0);
    const bool masked = key_starts != nullptr || k0 + 16 * warp + 15 > q0;
#pragma unroll
    for (int j = 0; j < QT / 8; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int column = lane_column(j, c), k = key[c / 2];
        st[j][c] = masked && (k > q0 + column || k < start_now[column])
                       ? 0.f
                       : exp2f(st[j][c] * scale_log2 - lse_now[column]);
      }
    multiply_pb<T, D, QT>(dv, st, sdo + now * QT * kStride<D>, 0);
    float dpt[QT / 8][4] = {};
    multiply_abt<T, D, QT>(dpt, sv, 16 * warp, sdo + now * QT * kStride<D>, 0);
#pragma unroll
    for (int j = 0; j < QT / 8; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) st[j][c] *= dpt[j][c] - delta_now[lane_column(j, c)];
    multiply_pb<T, D, QT>(dk, st, sq + now * QT * kStride<D>, 0);
    __syncthreads();  // this step's buffers are free for the copies two steps on
  }
  T* out = dqkv + token0 * dims.width;
  const float dk_factor[2] = {scale, scale}, dv_factor[2] = {1.f, 1.f};
  store_rows<T, D>(out + static_cast<int64_t>(dims.n_head + kv) * D, dims.width, dk, key,
                   dk_factor, dims.seq);
  store_rows<T, D>(out + static_cast<int64_t>(dims.n_head + dims.n_kv_head + kv) * D,
                   dims.width, dv, key, dv_factor, dims.seq);
}

// ---- host side ----------------------------------------------------------------------------

template <typename F>
void with_head_dim(int64_t head_dim, F&& f) {
  if (head_dim == 64) {
    f(std::integral_constant<int, 64>{});
  } else {
    f(std::integral_constant<int, 128>{});
  }
}

unsigned tiles(int seq, int tile) { return static_cast<unsigned>((seq + tile - 1) / tile); }

}  // namespace

template <typename T>
bool tensor_core_attention_applies(const HeadLayout& layout,
                                   std::initializer_list<const void*> tensors) {
  if (layout.head_dim != 64 && layout.head_dim != 128) return false;
  for (const void* tensor : tensors)
    if (reinterpret_cast<uintptr_t>(tensor) % 16 != 0) return false;
  return true;
}

template <typename T>
void attention_forward_tensor_core(T* out, float* lse, const T* qkv, const int32_t* key_starts,
                                   const HeadLayout& layout, cudaStream_t stream) {
  const AttentionDims dims = attention_dims(layout, "attention_forward");
  if (layout.batch == 0 || layout.seq == 0) return;
  with_head_dim(layout.head_dim, [&](auto head_dim) {
    constexpr int D = decltype(head_dim)::value;
    const auto kernel = forward_kernel<T, D>;
    constexpr size_t smem = 5 * tile_bytes<T, D>(kTile);
    allow_shared_memory(kernel, smem);
    const dim3 grid(tiles(dims.seq, kTile), dims.n_head, static_cast<unsigned>(layout.batch));
    kernel<<<grid, kThreads, smem, stream>>>(out, lse, qkv, key_starts, dims,
                                             attention_scale_log2(D));
    KILN_CUDA_CHECK_LAUNCH("attention forward (tensor cores)");
  });
}

template <typename T>
void attention_backward_tensor_core(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                    const float* delta, const int32_t* key_starts,
                                    const HeadLayout& layout, cudaStream_t stream) {
  const AttentionDims dims = attention_dims(layout, "attention_backward");
  if (layout.batch == 0 || layout.seq == 0) return;
  with_head_dim(layout.head_dim, [&](auto head_dim) {
    constexpr int D = decltype(head_dim)::value;
    const float scale_log2 = attention_scale_log2(D), scale = attention_scale(D);
    {
      const auto kernel = dq_kernel<T, D>;
      constexpr size_t smem = 6 * tile_bytes<T, D>(kTile);
      allow_shared_memory(kernel, smem);
      const dim3 grid(tiles(dims.seq, kTile), dims.n_head, static_cast<unsigned>(layout.batch));
      kernel<<<grid, kThreads, smem, stream>>>(dqkv, dout, qkv, lse, delta, key_starts, dims,
                                               scale_log2, scale);
      KILN_CUDA_CHECK_LAUNCH("attention backward dq (tensor cores)");
    }
    {
      const auto kernel = dkdv_kernel<T, D>;
      constexpr int QT = kQueryTile<D>;
      constexpr size_t smem = 2 * tile_bytes<T, D>(kTile) + 4 * tile_bytes<T, D>(QT) +
                              2 * QT * (2 * sizeof(float) + sizeof(int));
      allow_shared_memory(kernel, smem);
      const dim3 grid(tiles(dims.seq, kTile), dims.n_kv_head, static_cast<unsigned>(layout.batch));
      kernel<<<grid, kThreads, smem, stream>>>(dqkv, dout, qkv, lse, delta, key_starts, dims,
                                               scale_log2, scale);
      KILN_CUDA_CHECK_LAUNCH("attention backward dk/dv (tensor cores)");
    }
  });
}

#define KILN_INSTANTIATE(T)                                                                    \
  template bool tensor_core_attention_applies<T>(const HeadLayout&,                            \
                                                 std::initializer_list<const void*>);          \
  template void attention_forward_tensor_core<T>(T*, float*, const T*, const int32_t*,         \
                                                 const HeadLayout&, cudaStream_t);              \
  template void attention_backward_tensor_core<T>(T*, const T*, const T*, const float*,        \
                                                  const float*, const int32_t*,                \
                                                  const HeadLayout&, cudaStream_t);
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
