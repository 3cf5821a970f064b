// Rotary position embedding of the query and key heads of qkv[B, T, (n_head + 2 n_kv_head) *
// head_dim], in place: the twin of kiln::cpu::rope in kernels/cpu/attention.cpp.
//
// Rotate-half pairing over a head's last rope_dim dims (all of head_dim but under latent
// attention): element i of them pairs with i + rope_dim/2 and turns by the angle of
// table[t, i] = (cos, sin), t = positions[row], or row % seq without positions; the inverse
// (backward) turns by -angle. Value heads are left alone.
//
// Decomposition: one warp per token row; its lanes walk the (head, i) pairs of the rotated
// heads, P consecutive i at a time (P-element packs of both halves, 2P floats of table).
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kRowWarps = 8;
constexpr int kRowThreads = kRowWarps * 32;

template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    rope_kernel(T* qkv, const float* table, const int32_t* positions, int64_t rows, int64_t seq,
                int64_t width, int head_dim, int rope_dim, int rotated_heads, float sign) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (n >= rows) return;
  const int half = rope_dim / 2, packs_per_head = half / P, first = head_dim - rope_dim;
  T* row = qkv + n * width;
  const float* angles = table + position_of(positions, n, seq) * half * 2;
  for (int idx = lane; idx < rotated_heads * packs_per_head; idx += 32) {
    const int h = idx / packs_per_head, i = (idx % packs_per_head) * P;
    T* x = row + h * head_dim + first + i;
    float x1[P], x2[P], cs[2 * P];
    load_float(x1, x);
    load_float(x2, x + half);
    if constexpr (P == 1) {  // the unpacked path asks no alignment of the table
      cs[0] = angles[2 * i];
      cs[1] = angles[2 * i + 1];
    } else {
      load_float(cs, angles + 2 * i);
    }
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float c = cs[2 * k], s = sign * cs[2 * k + 1];
      const float a = x1[k], b = x2[k];
      x1[k] = a * c - b * s;
      x2[k] = b * c + a * s;
    }
    store_float(x, x1);
    store_float(x + half, x2);
  }
}

}  // namespace

template <typename T>
void rope(T* qkv, const float* table, const int32_t* positions, const HeadLayout& layout,
          bool inverse, cudaStream_t stream) {
  const int64_t rows = layout.batch * layout.seq;
  const int head_dim = static_cast<int>(layout.head_dim), rope_dim = static_cast<int>(layout.rope_dim);
  const int rotated_heads = static_cast<int>(layout.n_head + layout.n_kv_head);
  if (rows <= 0 || rope_dim < 2 || rotated_heads <= 0) return;
  KILN_CHECK(rope_dim % 2 == 0 && rope_dim <= head_dim, "rope: the turned dims must be even and within head_dim");
  constexpr int P = kPack<T>;
  // Packs of both halves: half a multiple of P (and the turned tail's start, so every pack
  // is aligned as the row is); the table pack is 2P floats.
  const bool packed = can_pack<P>(rope_dim / 2, qkv) && (head_dim - rope_dim) % P == 0 &&
                      reinterpret_cast<uintptr_t>(table) % (2 * P * sizeof(float)) == 0;
  with_pack<T>(packed, [&](auto p) {
    rope_kernel<T, decltype(p)::value><<<blocks_for(rows, kRowWarps), kRowThreads, 0, stream>>>(
        qkv, table, positions, rows, layout.seq, layout.qkv_width(), head_dim, rope_dim, rotated_heads,
        inverse ? -1.0f : 1.0f);
    KILN_CUDA_CHECK_LAUNCH("rope_kernel");
  });
}

template void rope<float>(float*, const float*, const int32_t*, const HeadLayout&, bool,
                          cudaStream_t);
template void rope<__nv_bfloat16>(__nv_bfloat16*, const float*, const int32_t*, const HeadLayout&,
                                  bool, cudaStream_t);
template void rope<__half>(__half*, const float*, const int32_t*, const HeadLayout&, bool,
                           cudaStream_t);

}  // namespace kiln::cuda
