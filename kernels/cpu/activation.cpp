// GELU (tanh approximation, as GPT-2) and SwiGLU (as Llama).
#include <cmath>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

namespace {
constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;
}  // namespace

template <typename T>
void gelu_forward(T* out, const T* x, int64_t n) {
  const T k = static_cast<T>(kGeluScale), a = static_cast<T>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    out[i] = T(0.5) * v * (T(1) + vtanh(k * (v + a * v * v * v)));
  }
}

template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, int64_t n) {
  const T k = static_cast<T>(kGeluScale), a = static_cast<T>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T th = vtanh(k * (v + a * v * v * v));
    const T sech2 = T(1) - th * th;
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * v * sech2 * k * (T(1) + T(3) * a * v * v);
    dx[i] = dout[i] * grad;
  }
}

template <typename T>
void swiglu_forward(T* out, const T* x, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* gate = x + n * 2 * F;
    const T* up = gate + F;
    T* o = out + n * F;
#pragma omp simd
    for (int64_t f = 0; f < F; ++f) o[f] = gate[f] * vsigmoid(gate[f]) * up[f];
  }
}

template <typename T>
void swiglu_backward(T* dx, const T* x, const T* dout, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* gate = x + n * 2 * F;
    const T* up = gate + F;
    const T* d = dout + n * F;
    T* dgate = dx + n * 2 * F;
    T* dup = dgate + F;
#pragma omp simd
    for (int64_t f = 0; f < F; ++f) {
      const T s = vsigmoid(gate[f]);
      const T silu = gate[f] * s;
      const T g = gate[f], u = up[f], df = d[f];
      dgate[f] = df * u * s * (T(1) + g * (T(1) - s));
      dup[f] = df * silu;
    }
  }
}

#define KILN_INSTANTIATE(T)                                              \
  template void gelu_forward<T>(T*, const T*, int64_t);                  \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);       \
  template void swiglu_forward<T>(T*, const T*, int64_t, int64_t);       \
  template void swiglu_backward<T>(T*, const T*, const T*, int64_t, int64_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
#undef KILN_INSTANTIATE

}  // namespace kiln::cpu
