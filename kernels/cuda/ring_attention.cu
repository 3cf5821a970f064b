// Ring attention's blocks (context parallelism): the twin of kernels/cpu/ring_attention.cpp.
//
// One warp per row, lanes striding the head dim, every sum in float:
//  - forward: a warp per query row (b, h, i) keeps an online softmax over the block's visible
//    keys and merges the block into the running out and lse;
//  - backward: a warp per query row adds its dQ over the visible keys, and a warp per key row
//    (b, g, j) adds its dK and dV over the visible queries of the heads that share it, so no
//    two warps write one element. The probabilities are rebuilt from the merged lse.
// Plain warps rather than tensor-core tiles: the ring's blocks are the first thing the GPU
// session measures, against the tiled kernels of attention.cu.
#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

template <typename T>
__device__ float warp_dot(const T* a, const T* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t d = threadIdx.x % 32; d < n; d += 32) sum += to_float(a[d]) * to_float(b[d]);
  return warp_sum(sum);
}

__device__ __forceinline__ int64_t width_of(const HeadLayout& L) {
  return (L.n_head + 2 * L.n_kv_head) * L.head_dim;
}

__device__ __forceinline__ bool sees(int32_t query, int32_t start, int32_t key) {
  return key <= query && key >= start;
}

// Head dims up to 256: each lane holds up to 8 of a row's accumulators.
constexpr int kPerLane = 8;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ring_forward_kernel(T* out, float* lse, const T* qkv, const T* kv, const int32_t* q_index,
                        const int32_t* k_index, const int32_t* key_starts, HeadLayout L, int64_t keys) {
  const int64_t Tq = L.seq, hd = L.head_dim, width = width_of(L);
  const int64_t kv_width = 2 * L.n_kv_head * hd, v_at = L.n_kv_head * hd;
  const int64_t row = warp_row();
  if (row >= L.batch * L.n_head * Tq) return;
  const int64_t b = row / (L.n_head * Tq), h = row / Tq % L.n_head, i = row % Tq;
  const int64_t g = h / (L.n_head / L.n_kv_head), lane = threadIdx.x % 32;
  const float scale = rsqrtf(static_cast<float>(hd));
  const T* q = qkv + (b * Tq + i) * width + h * hd;
  const int32_t query = q_index[i], start = key_starts ? key_starts[b * Tq + i] : 0;
  float max = -INFINITY, sum = 0.0f, acc[kPerLane] = {};
  for (int64_t j = 0; j < keys; ++j) {
    if (!sees(query, start, k_index[j])) continue;
    const T* k = kv + (b * keys + j) * kv_width + g * hd;
    const float score = scale * warp_dot(q, k, hd);
    if (score > max) {
      const float shrink = __expf(max - score);
      sum *= shrink;
      for (int c = 0; c < kPerLane; ++c) acc[c] *= shrink;
      max = score;
    }
    const float p = __expf(score - max);
    sum += p;
    for (int c = 0; c < kPerLane && lane + 32 * c < hd; ++c) acc[c] += p * to_float(k[v_at + lane + 32 * c]);
  }
  if (sum == 0.0f) return;
  T* o = out + (b * Tq + i) * L.n_head * hd + h * hd;
  float& running = lse[(b * L.n_head + h) * Tq + i];
  const float block = max + logf(sum), was = running;
  const float merged = fmaxf(was, block) + log1pf(__expf(-fabsf(was - block)));
  const float keep = __expf(was - merged), add = __expf(block - merged) / sum;
  for (int c = 0; c < kPerLane && lane + 32 * c < hd; ++c) {
    T& x = o[lane + 32 * c];
    x = from_float<T>(to_float(x) * keep + acc[c] * add);
  }
  __syncwarp();
  if (lane == 0) running = merged;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ring_query_gradient_kernel(T* dqkv, const T* dout, const T* qkv, const T* kv, const T* out,
                               const float* lse, const int32_t* q_index, const int32_t* k_index,
                               const int32_t* key_starts, HeadLayout L, int64_t keys) {
  const int64_t Tq = L.seq, hd = L.head_dim, width = width_of(L), out_width = L.n_head * hd;
  const int64_t kv_width = 2 * L.n_kv_head * hd, v_at = L.n_kv_head * hd;
  const int64_t row = warp_row();
  if (row >= L.batch * L.n_head * Tq) return;
  const int64_t b = row / (L.n_head * Tq), h = row / Tq % L.n_head, i = row % Tq;
  const int64_t g = h / (L.n_head / L.n_kv_head), lane = threadIdx.x % 32, at = b * Tq + i;
  const float scale = rsqrtf(static_cast<float>(hd));
  const T* q = qkv + at * width + h * hd;
  const T* d_o = dout + at * out_width + h * hd;
  const float row_lse = lse[(b * L.n_head + h) * Tq + i];
  const float delta = warp_dot(d_o, out + at * out_width + h * hd, hd);
  const int32_t query = q_index[i], start = key_starts ? key_starts[at] : 0;
  float dq[kPerLane] = {};
  for (int64_t j = 0; j < keys; ++j) {
    if (!sees(query, start, k_index[j])) continue;
    const T* k = kv + (b * keys + j) * kv_width + g * hd;
    const float p = __expf(scale * warp_dot(q, k, hd) - row_lse);
    const float ds = scale * p * (warp_dot(d_o, k + v_at, hd) - delta);
    for (int c = 0; c < kPerLane && lane + 32 * c < hd; ++c) dq[c] += ds * to_float(k[lane + 32 * c]);
  }
  T* dst = dqkv + at * width + h * hd;
  for (int c = 0; c < kPerLane && lane + 32 * c < hd; ++c) {
    T& x = dst[lane + 32 * c];
    x = from_float<T>(to_float(x) + dq[c]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ring_key_gradient_kernel(T* dkv, const T* dout, const T* qkv, const T* kv, const T* out,
                             const float* lse, const int32_t* q_index, const int32_t* k_index,
                             const int32_t* key_starts, HeadLayout L, int64_t keys) {
  const int64_t Tq = L.seq, hd = L.head_dim, width = width_of(L), out_width = L.n_head * hd;
  const int64_t kv_width = 2 * L.n_kv_head * hd, v_at = L.n_kv_head * hd;
  const int64_t row = warp_row();
  if (row >= L.batch * L.n_kv_head * keys) return;
  const int64_t b = row / (L.n_kv_head * keys), g = row / keys % L.n_kv_head, j = row % keys;
  const int64_t group = L.n_head / L.n_kv_head, lane = threadIdx.x % 32;
  const float scale = rsqrtf(static_cast<float>(hd));
  const T* k = kv + (b * keys + j) * kv_width + g * hd;
  const int32_t key = k_index[j];
  float dk[kPerLane] = {}, dv[kPerLane] = {};
  for (int64_t h = g * group; h < (g + 1) * group; ++h)
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t at = b * Tq + i;
      if (!sees(q_index[i], key_starts ? key_starts[at] : 0, key)) continue;
      const T* q = qkv + at * width + h * hd;
      const T* d_o = dout + at * out_width + h * hd;
      const float p = __expf(scale * warp_dot(q, k, hd) - lse[(b * L.n_head + h) * Tq + i]);
      const float delta = warp_dot(d_o, out + at * out_width + h * hd, hd);
      const float ds = scale * p * (warp_dot(d_o, k + v_at, hd) - delta);
      for (int c = 0; c < kPerLane && lane + 32 * c < hd; ++c) {
        dv[c] += p * to_float(d_o[lane + 32 * c]);
        dk[c] += ds * to_float(q[lane + 32 * c]);
      }
    }
  T* dst = dkv + (b * keys + j) * kv_width + g * hd;
  for (int c = 0; c < kPerLane && lane + 32 * c < hd; ++c) {
    dst[lane + 32 * c] = from_float<T>(to_float(dst[lane + 32 * c]) + dk[c]);
    dst[v_at + lane + 32 * c] = from_float<T>(to_float(dst[v_at + lane + 32 * c]) + dv[c]);
  }
}

// A thread per element of kv: its copy from qkv, or (add) its gradient into dqkv.
template <typename T>
__global__ void kv_columns_kernel(T* qkv, T* kv, HeadLayout L, bool add) {
  const int64_t kv_width = 2 * L.n_kv_head * L.head_dim, n = L.batch * L.seq * kv_width;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += int64_t{gridDim.x} * blockDim.x) {
    T& column = qkv[e / kv_width * width_of(L) + L.n_head * L.head_dim + e % kv_width];
    if (add) column = from_float<T>(to_float(column) + to_float(kv[e]));
    else kv[e] = column;
  }
}

}  // namespace

template <typename T>
void ring_attention_forward(T* out, float* lse, const T* qkv, const T* kv, const int32_t* q_index,
                            const int32_t* k_index, const int32_t* key_starts, const HeadLayout& L,
                            int64_t keys, cudaStream_t stream) {
  const int64_t rows = L.batch * L.n_head * L.seq;
  if (rows <= 0 || keys <= 0) return;
  ring_forward_kernel<T><<<blocks_for(rows, kWarps), kThreads, 0, stream>>>(out, lse, qkv, kv, q_index, k_index,
                                                                             key_starts, L, keys);
  KILN_CUDA_CHECK_LAUNCH("ring_forward_kernel");
}

template <typename T>
void ring_attention_backward(T* dqkv, T* dkv, const T* dout, const T* qkv, const T* kv, const T* out,
                             const float* lse, const int32_t* q_index, const int32_t* k_index,
                             const int32_t* key_starts, const HeadLayout& L, int64_t keys, cudaStream_t stream) {
  const int64_t queries = L.batch * L.n_head * L.seq, key_rows = L.batch * L.n_kv_head * keys;
  if (queries <= 0 || keys <= 0) return;
  ring_query_gradient_kernel<T><<<blocks_for(queries, kWarps), kThreads, 0, stream>>>(
      dqkv, dout, qkv, kv, out, lse, q_index, k_index, key_starts, L, keys);
  KILN_CUDA_CHECK_LAUNCH("ring_query_gradient_kernel");
  ring_key_gradient_kernel<T><<<blocks_for(key_rows, kWarps), kThreads, 0, stream>>>(
      dkv, dout, qkv, kv, out, lse, q_index, k_index, key_starts, L, keys);
  KILN_CUDA_CHECK_LAUNCH("ring_key_gradient_kernel");
}

template <typename T>
void split_kv(T* kv, const T* qkv, const HeadLayout& L, cudaStream_t stream) {
  const int64_t n = L.batch * L.seq * 2 * L.n_kv_head * L.head_dim;
  if (n <= 0) return;
  kv_columns_kernel<T><<<blocks_for(n, 256, 4096), 256, 0, stream>>>(const_cast<T*>(qkv), kv, L, false);
  KILN_CUDA_CHECK_LAUNCH("kv_columns_kernel");
}

template <typename T>
void add_kv_gradient(T* dqkv, const T* dkv, const HeadLayout& L, cudaStream_t stream) {
  const int64_t n = L.batch * L.seq * 2 * L.n_kv_head * L.head_dim;
  if (n <= 0) return;
  kv_columns_kernel<T><<<blocks_for(n, 256, 4096), 256, 0, stream>>>(dqkv, const_cast<T*>(dkv), L, true);
  KILN_CUDA_CHECK_LAUNCH("kv_columns_kernel");
}

#define KILN_INSTANTIATE(T)                                                                              \
  template void ring_attention_forward<T>(T*, float*, const T*, const T*, const int32_t*, const int32_t*, \
                                          const int32_t*, const HeadLayout&, int64_t, cudaStream_t);      \
  template void ring_attention_backward<T>(T*, T*, const T*, const T*, const T*, const T*, const float*,  \
                                           const int32_t*, const int32_t*, const int32_t*,              \
                                           const HeadLayout&, int64_t, cudaStream_t);                    \
  template void split_kv<T>(T*, const T*, const HeadLayout&, cudaStream_t);                              \
  template void add_kv_gradient<T>(T*, const T*, const HeadLayout&, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
