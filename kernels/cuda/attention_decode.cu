// Attention over a key/value cache, for generation: the twin of
// kernels/cpu/attention_decode.cpp (Ops::attention_decode).
//
// Two launches. append_kv copies the new positions' key and value heads into the caches.
// decode gives one block to each query (sequence, new position, head): its kWarps warps take
// the cache rows j = warp, warp + kWarps, ... up to the query's own position; for each row
// the 32 lanes share the dot product (lane l holds dims l, l + 32, ...), and each warp keeps
// its own online softmax (running max, sum and a float accumulator per dim). The warps'
// partial results are then merged in warp order through shared memory, so the bits do not
// depend on timing. All arithmetic is in float; each lane holds PerLane dims: 8 (heads up to
// 256 wide) or 24 (up to 768: latent attention's cache rows, DeepSeek-V3's 576).
//
// This is the plain version: one query per block reads its keys once per head of a group.
// Sharing a kv head's loads across its query heads (and splitting long caches over several
// blocks, as flash-decoding does) is the next step when decoding is measured.
#include <cmath>
#include <string>

#include "base/check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kNarrowPerLane = 8;  // head_dim <= 256
constexpr int kWidePerLane = 24;   // head_dim <= 768
constexpr int kAppendThreads = 256;

struct DecodeDims {
  int64_t width = 0;     // elements per token in qkv
  int64_t kv_width = 0;  // n_kv_head * head_dim: elements per cache row
  int64_t capacity = 0;  // cache rows per sequence
  int64_t pos = 0;       // position of the first new token
  int64_t seq = 0;       // new positions per sequence
  int n_head = 0;
  int group = 0;  // query heads per kv head
  int head_dim = 0;
  float scale = 0;
};

template <typename T>
__global__ void __launch_bounds__(kAppendThreads)
    append_kv_kernel(T* k_cache, T* v_cache, const T* qkv, int64_t rows, DecodeDims d) {
  const int64_t count = rows * d.kv_width;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kAppendThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kAppendThreads + threadIdx.x; i < count;
       i += stride) {
    const int64_t n = i / d.kv_width, c = i % d.kv_width;
    const T* key = qkv + n * d.width + static_cast<int64_t>(d.n_head) * d.head_dim + c;
    const int64_t row = (n / d.seq) * d.capacity + d.pos + n % d.seq;
    k_cache[row * d.kv_width + c] = key[0];
    v_cache[row * d.kv_width + c] = key[d.kv_width];  // the value heads follow the keys
  }
}

template <typename T, int PerLane>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(T* out, const T* k_cache, const T* v_cache, const T* qkv, DecodeDims d) {
  __shared__ float warp_max[kWarps], warp_total[kWarps];
  __shared__ float warp_acc[kWarps][32 * PerLane];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int h = static_cast<int>(blockIdx.x % d.n_head);
  const int64_t n = blockIdx.x / d.n_head;  // the query's token row: b * seq + t
  const int64_t last = d.pos + n % d.seq;   // the last cache row it sees
  const T* q = qkv + n * d.width + static_cast<int64_t>(h) * d.head_dim;
  const int64_t head =
      (n / d.seq) * d.capacity * d.kv_width + static_cast<int64_t>(h / d.group) * d.head_dim;

  float qr[PerLane], acc[PerLane];
#pragma unroll
  for (int i = 0; i < PerLane; ++i) {
    const int dim = lane + 32 * i;
    qr[i] = dim < d.head_dim ? to_float(q[dim]) : 0.0f;
    acc[i] = 0.0f;
  }
  float max = -INFINITY, total = 0.0f;
  for (int64_t j = warp; j <= last; j += kWarps) {
    const T* k = k_cache + head + j * d.kv_width;
    const T* v = v_cache + head + j * d.kv_width;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < PerLane; ++i) {
      const int dim = lane + 32 * i;
      if (dim < d.head_dim) s += qr[i] * to_float(k[dim]);
    }
    s = warp_sum(s) * d.scale;
    const float new_max = fmaxf(max, s);
    const float shrink = expf(max - new_max);  // 0 at the warp's first row
    const float p = expf(s - new_max);
    total = total * shrink + p;
#pragma unroll
    for (int i = 0; i < PerLane; ++i) {
      const int dim = lane + 32 * i;
      if (dim < d.head_dim) acc[i] = acc[i] * shrink + p * to_float(v[dim]);
    }
    max = new_max;
  }

  if (lane == 0) {
    warp_max[warp] = max;
    warp_total[warp] = total;
  }
#pragma unroll
  for (int i = 0; i < PerLane; ++i) warp_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  // Warp 0 always saw row 0, so the max is finite; a warp that saw no row weighs 0.
  float m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, warp_max[w]);
  float sum = 0.0f;
  for (int w = 0; w < kWarps; ++w) sum += warp_total[w] * expf(warp_max[w] - m);
  T* o = out + (n * d.n_head + h) * d.head_dim;
  for (int dim = threadIdx.x; dim < d.head_dim; dim += kThreads) {
    float value = 0.0f;
    for (int w = 0; w < kWarps; ++w) value += warp_acc[w][dim] * expf(warp_max[w] - m);
    o[dim] = from_float<T>(value / sum);
  }
}

}  // namespace

template <typename T>
void attention_decode(T* out, T* k_cache, T* v_cache, const T* qkv, const HeadLayout& layout,
                      int64_t capacity, int64_t pos, cudaStream_t stream) {
  KILN_CHECK(layout.head_dim >= 1 && layout.head_dim <= 32 * kWidePerLane,
             "attention_decode: head dim " + std::to_string(layout.head_dim) +
                 " is above the CUDA kernel's " + std::to_string(32 * kWidePerLane));
  const int64_t rows = layout.batch * layout.seq;
  if (rows <= 0) return;
  DecodeDims d;
  d.width = layout.qkv_width();
  d.kv_width = layout.n_kv_head * layout.head_dim;
  d.capacity = capacity;
  d.pos = pos;
  d.seq = layout.seq;
  d.n_head = static_cast<int>(layout.n_head);
  d.group = static_cast<int>(layout.n_head / layout.n_kv_head);
  d.head_dim = static_cast<int>(layout.head_dim);
  d.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(layout.head_dim)));
  append_kv_kernel<<<blocks_for(rows * d.kv_width, kAppendThreads, 1 << 16), kAppendThreads, 0,
                     stream>>>(k_cache, v_cache, qkv, rows, d);
  KILN_CUDA_CHECK_LAUNCH("append_kv_kernel");
  const unsigned blocks = static_cast<unsigned>(rows * layout.n_head);
  if (d.head_dim <= 32 * kNarrowPerLane)
    decode_kernel<T, kNarrowPerLane><<<blocks, kThreads, 0, stream>>>(out, k_cache, v_cache, qkv, d);
  else
    decode_kernel<T, kWidePerLane><<<blocks, kThreads, 0, stream>>>(out, k_cache, v_cache, qkv, d);
  KILN_CUDA_CHECK_LAUNCH("decode_kernel");
}

template void attention_decode<float>(float*, float*, float*, const float*, const HeadLayout&,
                                      int64_t, int64_t, cudaStream_t);
template void attention_decode<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                              const __nv_bfloat16*, const HeadLayout&, int64_t,
                                              int64_t, cudaStream_t);
template void attention_decode<__half>(__half*, __half*, __half*, const __half*, const HeadLayout&,
                                       int64_t, int64_t, cudaStream_t);

}  // namespace kiln::cuda
