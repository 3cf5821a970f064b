// Ops::dropout's CPU body, the reference for the CUDA one (kernels/cuda/dropout.cu): each
// element draws its own keep from the counter-based mask (kernels/dropout_mask.h), so the
// threads' split changes nothing. Built with -ffp-contract=off (CMakeLists.txt), as the CUDA
// body is with -fmad=false: a kept element is x * factor rounded, then added to out rounded.
#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

template <typename T>
void dropout(T* out, const T* x, int64_t N, int64_t C, const DropoutMask& mask, bool accumulate) {
  const T factor = static_cast<T>(mask.factor());
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < N; ++row)
    for (int64_t col = 0; col < C; ++col) {
      const int64_t i = row * C + col;
      const T kept = mask.keep(row, col) ? x[i] * factor : T(0);
      out[i] = accumulate ? out[i] + kept : kept;
    }
}

template void dropout<float>(float*, const float*, int64_t, int64_t, const DropoutMask&, bool);
template void dropout<double>(double*, const double*, int64_t, int64_t, const DropoutMask&, bool);

}  // namespace kiln::cpu
