// AdamW with decoupled weight decay, in the same arithmetic order as PyTorch's
// torch.optim.AdamW (decay first, then the bias-corrected Adam step).
#include <cmath>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

template <typename T>
void adamw(T* param, const T* grad, T* m, T* v, int64_t n, double lr, double beta1, double beta2,
           double eps, double weight_decay, int64_t step, double grad_scale) {
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const T step_size = static_cast<T>(lr / correction1);
  const T root_correction2 = static_cast<T>(std::sqrt(correction2));
  const T decay = static_cast<T>(1.0 - lr * weight_decay);
  const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2), e = static_cast<T>(eps);
  const T scale = static_cast<T>(grad_scale);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i] * scale;
    m[i] = b1 * m[i] + (T(1) - b1) * g;
    v[i] = b2 * v[i] + (T(1) - b2) * g * g;
    const T denom = std::sqrt(v[i]) / root_correction2 + e;
    param[i] = param[i] * decay - step_size * m[i] / denom;
  }
}

template void adamw<float>(float*, const float*, float*, float*, int64_t, double, double, double,
                           double, double, int64_t, double);
template void adamw<double>(double*, const double*, double*, double*, int64_t, double, double,
                            double, double, double, int64_t, double);

}  // namespace kiln::cpu
