// GELU (tanh approximation, as GPT-2) and SwiGLU (as Llama).
#include <cmath>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

namespace {
constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;
}  // namespace

// GELU-tanh as 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2 / pi) (x + 0.044715 x^3):
// the same function with one exp and one division, the fewest of its forms.
template <typename T>
void gelu_forward(T* out, const T* x, int64_t n) {
  const T k = static_cast<T>(2 * kGeluScale), a = static_cast<T>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    out[i] = v * vsigmoid(k * (v + a * v * v * v));
  }
}

// d/dx x s(2u) = s + x s (1 - s) 2u', with s = sigmoid(2u), 2u' = k (1 + 3 * 0.044715 x^2).
template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, int64_t n) {
  const T k = static_cast<T>(2 * kGeluScale), a = static_cast<T>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T s = vsigmoid(k * (v + a * v * v * v));
    dx[i] = dout[i] * (s + v * s * (T(1) - s) * k * (T(1) + T(3) * a * v * v));
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
