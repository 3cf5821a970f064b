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
//
// With the optimizer's scalars (optimizer_scalars.h) every block reads the step's terms and
// the gradient factor from device memory, written there by the host's copy and by
// clip_factor earlier on the stream, so a captured step needs no host value of its own.

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

// The step's terms and factor from the scalars, rounded to float as the host rounds them.
__device__ bool read_scalars(AdamWConstants& k, const double* scalars) {
  if (scalars[kSkip] != 0) return false;
  k.step_size = static_cast<float>(scalars[kStepSize]);
  k.root_correction2 = static_cast<float>(scalars[kRootCorrection2]);
  k.decay = static_cast<float>(scalars[kDecay]);
  k.grad_scale = static_cast<float>(scalars[kGradScale]);
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kAdamThreads)
    adamw_kernel(float* master, const float* grad, float* m, float* v, T* param_copy,
                 const AdamWSegment* segments, int n_segments, AdamWConstants k,
                 const double* scalars) {
  if (scalars && !read_scalars(k, scalars)) return;
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

__global__ void clip_factor_kernel(double* scalars) { clip_rule(scalars); }

}  // namespace

template <typename T>
void adamw(float* master, const float* grad, float* m, float* v, T* param_copy,
           const AdamWSegment* segments, int n_segments, float beta1, float beta2, float eps,
           const AdamWTerms& terms, float grad_scale, const double* scalars, cudaStream_t stream) {
  if (n_segments <= 0) return;
  // The host's terms in double, rounded once, as the CPU twin rounds them.
  const AdamWConstants k{beta1,
                         1.0f - beta1,
                         beta2,
                         1.0f - beta2,
                         eps,
                         static_cast<float>(terms.step_size),
                         static_cast<float>(terms.root_correction2),
                         static_cast<float>(terms.decay),
                         grad_scale};
  adamw_kernel<T><<<kAdamBlocks, kAdamThreads, 0, stream>>>(master, grad, m, v, param_copy,
                                                            segments, n_segments, k, scalars);
  KILN_CUDA_CHECK_LAUNCH("adamw_kernel");
}

void clip_factor(double* scalars, cudaStream_t stream) {
  clip_factor_kernel<<<1, 1, 0, stream>>>(scalars);
  KILN_CUDA_CHECK_LAUNCH("clip_factor_kernel");
}

#define KILN_INSTANTIATE(T)                                                                     \
  template void adamw<T>(float*, const float*, float*, float*, T*, const AdamWSegment*, int, float, \
                         float, float, const AdamWTerms&, float, const double*, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
