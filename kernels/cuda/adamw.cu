// AdamW over every parameter tensor in one launch (multi-tensor): the twin of
// kernels/cpu/adamw.cpp, in torch.optim.AdamW's arithmetic (decay first, then the
// bias-corrected Adam step), all in float.
//
// Decomposition: the flat range [0, segments[n - 1].end) is cut into chunks of 4096
// elements; a fixed grid of blocks takes chunks with a grid stride. A block finds the first
// segment that ends after its chunk by binary search (every thread reads the same entries),
// then walks the segments that intersect the chunk, its 256 threads striding each
// intersection element by element (coalesced). Elements in no segment (padding) are never
// touched. Segments must be sorted by begin and must not overlap (the trainer's table is).
#include <cmath>

#include "base/check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kAdamThreads = 256;
constexpr int64_t kAdamChunk = 4096;
constexpr int kAdamBlocks = 1024;  // enough to fill any current GPU; chunks loop beyond it

struct AdamWConstants {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  float step_size;         // lr / (1 - beta1^step)
  float root_correction2;  // sqrt(1 - beta2^step)
  float decay;             // 1 - lr * weight_decay, for segments with decay = 1
  float grad_scale;        // each gradient's factor (1 / loss scale, times the clip)
};

template <typename T>
__global__ void __launch_bounds__(kAdamThreads)
    adamw_kernel(float* master, const float* grad, float* m, float* v, T* param_copy,
                 const AdamWSegment* segments, int n_segments, AdamWConstants k) {
  const int64_t total = segments[n_segments - 1].end;
  for (int64_t c0 = blockIdx.x * kAdamChunk; c0 < total; c0 += gridDim.x * kAdamChunk) {
    const int64_t c1 = c0 + kAdamChunk < total ? c0 + kAdamChunk : total;
    int lo = 0, hi = n_segments;  // first segment with end > c0
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (segments[mid].end > c0) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    for (int s = lo; s < n_segments && segments[s].begin < c1; ++s) {
      const AdamWSegment seg = segments[s];
      const float decay = seg.decay ? k.decay : 1.0f;
      const int64_t end = seg.end < c1 ? seg.end : c1;
      for (int64_t i = (seg.begin > c0 ? seg.begin : c0) + threadIdx.x; i < end;
           i += kAdamThreads) {
        const float g = grad[i] * k.grad_scale;
        const float mi = k.beta1 * m[i] + k.one_minus_beta1 * g;
        const float vi = k.beta2 * v[i] + k.one_minus_beta2 * g * g;
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) / k.root_correction2 + k.eps;
        const float p = master[i] * decay - k.step_size * mi / denom;
        master[i] = p;
        if (param_copy) param_copy[i] = from_float<T>(p);
      }
    }
  }
}

}  // namespace

template <typename T>
void adamw(float* master, const float* grad, float* m, float* v, T* param_copy,
           const AdamWSegment* segments, int n_segments, float lr, float beta1, float beta2,
           float eps, float weight_decay, int64_t step, float grad_scale, cudaStream_t stream) {
  if (n_segments <= 0) return;
  KILN_CHECK(step >= 1, "adamw: step is 1-based");
  // Host constants in double, rounded once, as the CPU twin computes them.
  const double correction1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double correction2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  const AdamWConstants k{beta1,
                         1.0f - beta1,
                         beta2,
                         1.0f - beta2,
                         eps,
                         static_cast<float>(lr / correction1),
                         static_cast<float>(std::sqrt(correction2)),
                         static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay),
                         grad_scale};
  adamw_kernel<T><<<kAdamBlocks, kAdamThreads, 0, stream>>>(master, grad, m, v, param_copy,
                                                            segments, n_segments, k);
  KILN_CUDA_CHECK_LAUNCH("adamw_kernel");
}

template void adamw<float>(float*, const float*, float*, float*, float*, const AdamWSegment*, int,
                           float, float, float, float, float, int64_t, float, cudaStream_t);
template void adamw<__nv_bfloat16>(float*, const float*, float*, float*, __nv_bfloat16*,
                                   const AdamWSegment*, int, float, float, float, float, float,
                                   int64_t, float, cudaStream_t);
template void adamw<__half>(float*, const float*, float*, float*, __half*, const AdamWSegment*, int,
                            float, float, float, float, float, int64_t, float, cudaStream_t);

}  // namespace kiln::cuda
