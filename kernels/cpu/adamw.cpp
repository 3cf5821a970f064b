// AdamW with decoupled weight decay, in the same arithmetic order as PyTorch's
// torch.optim.AdamW (decay first, then the bias-corrected Adam step).
#include <cmath>

#include "kernels/cpu/kernels.h"
#include "kernels/optimizer_scalars.h"

namespace kiln {

// Here, compiled as the CPU body that used to compute them itself, so the CPU's updates keep
// their bits; the CUDA backend and the trainer's scalars take the same terms.
AdamWTerms adamw_terms(double lr, double beta1, double beta2, double weight_decay, int64_t step) {
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  return {lr / correction1, std::sqrt(correction2), 1.0 - lr * weight_decay};
}

namespace cpu {

template <typename T>
void adamw(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWTerms& terms, bool decays,
           double beta1, double beta2, double eps, double grad_scale) {
  const T step_size = static_cast<T>(terms.step_size);
  const T root_correction2 = static_cast<T>(terms.root_correction2);
  const T decay = decays ? static_cast<T>(terms.decay) : T(1);
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

template void adamw<float>(float*, const float*, float*, float*, int64_t, const AdamWTerms&, bool,
                           double, double, double, double);
template void adamw<double>(double*, const double*, double*, double*, int64_t, const AdamWTerms&,
                            bool, double, double, double, double);

}  // namespace cpu
}  // namespace kiln
