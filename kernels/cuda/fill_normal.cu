// Ops::fill_normal's CUDA body, the twin of kernels/cpu/fill_normal.cpp and equal to it bit for
// bit (fill_normal_cuda_test.cpp): a grid-stride loop in which each thread draws its elements'
// normals by index (kernels/counter_random.h) and rounds them as the host does, double to float
// to T, each step to nearest even. Built with -fmad=false (CMakeLists.txt): the only fused
// multiply-adds are the header's explicit ones.
#include "kernels/counter_random.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kFillThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kFillThreads)
    fill_normal_kernel(T* x, RandomRuns runs, uint64_t seed, uint64_t stream, double mean, double std) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kFillThreads;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kFillThreads + threadIdx.x; e < runs.count(); e += step) {
    const double v = exact::fma(std, counter_normal(seed, stream, runs.index(e)), mean);
    x[runs.offset(e)] = from_float<T>(__double2float_rn(v));
  }
}

}  // namespace

template <typename T>
void fill_normal(T* x, const RandomRuns& runs, uint64_t seed, uint64_t stream, double mean, double std,
                 cudaStream_t s) {
  if (runs.count() == 0) return;
  fill_normal_kernel<T><<<blocks_for(runs.count(), kFillThreads, 1 << 16), kFillThreads, 0, s>>>(
      x, runs, seed, stream, mean, std);
  KILN_CUDA_CHECK_LAUNCH("fill_normal_kernel");
}

#define KILN_INSTANTIATE(T) \
  template void fill_normal<T>(T*, const RandomRuns&, uint64_t, uint64_t, double, double, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
