// Ops::dropout's CUDA body, the twin of kernels/cpu/dropout.cpp and equal to it bit for bit in
// fp32 (dropout_cuda_test.cpp): a grid-stride loop in which each thread draws its elements'
// keeps by index (kernels/dropout_mask.h) and rounds as the host does: x * factor, then the sum
// with out, each in float to nearest even (bf16 and fp16 rounded once more as they are stored).
// Built with -fmad=false (CMakeLists.txt), and the product and sum are spelled out all the same.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kDropoutThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kDropoutThreads)
    dropout_kernel(T* out, const T* x, int64_t N, int64_t C, DropoutMask mask, bool accumulate) {
  const float factor = mask.factor();
  const int64_t step = static_cast<int64_t>(gridDim.x) * kDropoutThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kDropoutThreads + threadIdx.x; i < N * C; i += step) {
    const float kept = mask.keep(i / C, i % C) ? __fmul_rn(to_float(x[i]), factor) : 0.0f;
    out[i] = from_float<T>(accumulate ? __fadd_rn(to_float(out[i]), kept) : kept);
  }
}

}  // namespace

template <typename T>
void dropout(T* out, const T* x, int64_t N, int64_t C, const DropoutMask& mask, bool accumulate, cudaStream_t s) {
  if (N * C == 0) return;
  dropout_kernel<T><<<blocks_for(N * C, kDropoutThreads, 1 << 16), kDropoutThreads, 0, s>>>(out, x, N, C, mask,
                                                                                           accumulate);
  KILN_CUDA_CHECK_LAUNCH("dropout_kernel");
}

#define KILN_INSTANTIATE(T) \
  template void dropout<T>(T*, const T*, int64_t, int64_t, const DropoutMask&, bool, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
