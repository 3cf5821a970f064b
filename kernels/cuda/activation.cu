// GELU (tanh approximation, as GPT-2) and SwiGLU (as Llama): the twins of
// kernels/cpu/activation.cpp. Arithmetic in float, one rounding to T per output.
//
// GELU: flat grid-stride maps over 16-byte packs (map_kernel), the tail element by element.
// SwiGLU: x[N, 2F] holds [gate | up] per row; one warp per row, lanes stride the F columns
//   in packs of P, reading the gate and up packs of the same columns.
#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <typename T>
struct GeluForward {
  T* out;
  const T* x;
  template <int W>
  __device__ void apply(int64_t i) const {
    float v[W];
    load_float(v, x + i);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float u = v[k];
      v[k] = 0.5f * u * (1.0f + tanhf(kGeluScale * (u + kGeluCubic * u * u * u)));
    }
    store_float(out + i, v);
  }
};

// dx = dout * gelu'(x); dx may alias dout (each element is read before it is written).
template <typename T>
struct GeluBackward {
  T* dx;
  const T* x;
  const T* dout;
  template <int W>
  __device__ void apply(int64_t i) const {
    float v[W], d[W];
    load_float(v, x + i);
    load_float(d, dout + i);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float u = v[k];
      const float th = tanhf(kGeluScale * (u + kGeluCubic * u * u * u));
      const float sech2 = 1.0f - th * th;
      const float grad =
          0.5f * (1.0f + th) + 0.5f * u * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * u * u);
      d[k] *= grad;
    }
    store_float(dx + i, d);
  }
};

constexpr int kRowWarps = 8;
constexpr int kRowThreads = kRowWarps * 32;

// out[n, f] = silu(gate[n, f]) * up[n, f]: one warp per row.
template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    swiglu_forward_kernel(T* out, const T* x, int64_t N, int64_t F) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (n >= N) return;
  const T* gate = x + n * 2 * F;
  const T* up = gate + F;
  T* o = out + n * F;
  for (int f = lane * P; f < F; f += 32 * P) {
    float g[P], u[P];
    load_float(g, gate + f);
    load_float(u, up + f);
#pragma unroll
    for (int k = 0; k < P; ++k) g[k] = g[k] * sigmoid(g[k]) * u[k];
    store_float(o + f, g);
  }
}

// dgate = dout * up * s * (1 + gate * (1 - s)), dup = dout * silu(gate), s = sigmoid(gate):
// one warp per row.
template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    swiglu_backward_kernel(T* dx, const T* x, const T* dout, int64_t N, int64_t F) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (n >= N) return;
  const T* gate = x + n * 2 * F;
  const T* up = gate + F;
  const T* d = dout + n * F;
  T* dgate = dx + n * 2 * F;
  T* dup = dgate + F;
  for (int f = lane * P; f < F; f += 32 * P) {
    float g[P], u[P], df[P], dg[P], du[P];
    load_float(g, gate + f);
    load_float(u, up + f);
    load_float(df, d + f);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float s = sigmoid(g[k]);
      dg[k] = df[k] * u[k] * s * (1.0f + g[k] * (1.0f - s));
      du[k] = df[k] * (g[k] * s);
    }
    store_float(dgate + f, dg);
    store_float(dup + f, du);
  }
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* x, int64_t n, cudaStream_t stream) {
  with_pack<T>(can_pack<kPack<T>>(0, out, x), [&](auto p) {
    launch_map<decltype(p)::value>(n, GeluForward<T>{out, x}, stream);
  });
}

template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, int64_t n, cudaStream_t stream) {
  with_pack<T>(can_pack<kPack<T>>(0, dx, x, dout), [&](auto p) {
    launch_map<decltype(p)::value>(n, GeluBackward<T>{dx, x, dout}, stream);
  });
}

template <typename T>
void swiglu_forward(T* out, const T* x, int64_t N, int64_t F, cudaStream_t stream) {
  if (N <= 0 || F <= 0) return;
  with_pack<T>(can_pack<kPack<T>>(F, out, x), [&](auto p) {
    swiglu_forward_kernel<T, decltype(p)::value>
        <<<blocks_for(N, kRowWarps), kRowThreads, 0, stream>>>(out, x, N, F);
    KILN_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
  });
}

template <typename T>
void swiglu_backward(T* dx, const T* x, const T* dout, int64_t N, int64_t F, cudaStream_t stream) {
  if (N <= 0 || F <= 0) return;
  with_pack<T>(can_pack<kPack<T>>(F, dx, x, dout), [&](auto p) {
    swiglu_backward_kernel<T, decltype(p)::value>
        <<<blocks_for(N, kRowWarps), kRowThreads, 0, stream>>>(dx, x, dout, N, F);
    KILN_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
  });
}

#define KILN_INSTANTIATE(T)                                                      \
  template void gelu_forward<T>(T*, const T*, int64_t, cudaStream_t);            \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t, cudaStream_t); \
  template void swiglu_forward<T>(T*, const T*, int64_t, int64_t, cudaStream_t); \
  template void swiglu_backward<T>(T*, const T*, const T*, int64_t, int64_t, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
