// Moving token rows to their experts and back: the twin of kernels/cpu/moe_rows.cpp.
//
// One warp per output row (per (token, choice) pair for row_dots), lanes striding the C
// channels; sums run in float, over a row's indices in order, so nothing races and results
// are deterministic. A row index < 0 names no row.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gather_rows_kernel(T* out, const T* x, const int32_t* rows, const float* weights, int64_t M,
                       int64_t C) {
  const int64_t m = warp_row();
  if (m >= M) return;
  const int32_t r = rows[m];
  const float w = r < 0 ? 0.0f : (weights ? weights[m] : 1.0f);
  const T* src = x + (r < 0 ? 0 : static_cast<int64_t>(r) * C);
  for (int64_t c = threadIdx.x % 32; c < C; c += 32)
    out[m * C + c] = from_float<T>(r < 0 ? 0.0f : w * to_float(src[c]));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    combine_rows_kernel(T* out, const T* x, const int32_t* rows, const float* weights, int64_t N,
                        int64_t k, int64_t C, bool accumulate) {
  const int64_t n = warp_row();
  if (n >= N) return;
  for (int64_t c = threadIdx.x % 32; c < C; c += 32) {
    float sum = accumulate ? to_float(out[n * C + c]) : 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t r = rows[n * k + j];
      if (r < 0) continue;
      sum += (weights ? weights[n * k + j] : 1.0f) * to_float(x[static_cast<int64_t>(r) * C + c]);
    }
    out[n * C + c] = from_float<T>(sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    row_dots_kernel(float* out, const T* a, const T* b, const int32_t* rows, int64_t N, int64_t k,
                    int64_t C) {
  const int64_t i = warp_row();  // the (token, choice) pair n * k + j
  if (i >= N * k) return;
  const int32_t r = rows[i];
  float dot = 0.0f;
  if (r >= 0) {
    const T* x = a + (i / k) * C;
    const T* y = b + static_cast<int64_t>(r) * C;
    for (int64_t c = threadIdx.x % 32; c < C; c += 32) dot += to_float(x[c]) * to_float(y[c]);
  }
  dot = warp_sum(dot);
  if (threadIdx.x % 32 == 0) out[i] = dot;
}

}  // namespace

template <typename T>
void gather_rows(T* out, const T* x, const int32_t* rows, const float* weights, int64_t M,
                 int64_t C, cudaStream_t stream) {
  if (M <= 0 || C <= 0) return;
  gather_rows_kernel<T><<<blocks_for(M, kWarps), kThreads, 0, stream>>>(out, x, rows, weights, M, C);
  KILN_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

template <typename T>
void combine_rows(T* out, const T* x, const int32_t* rows, const float* weights, int64_t N,
                  int64_t k, int64_t C, bool accumulate, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  combine_rows_kernel<T>
      <<<blocks_for(N, kWarps), kThreads, 0, stream>>>(out, x, rows, weights, N, k, C, accumulate);
  KILN_CUDA_CHECK_LAUNCH("combine_rows_kernel");
}

template <typename T>
void row_dots(float* out, const T* a, const T* b, const int32_t* rows, int64_t N, int64_t k,
              int64_t C, cudaStream_t stream) {
  if (N * k <= 0) return;
  row_dots_kernel<T><<<blocks_for(N * k, kWarps), kThreads, 0, stream>>>(out, a, b, rows, N, k, C);
  KILN_CUDA_CHECK_LAUNCH("row_dots_kernel");
}

#define KILN_INSTANTIATE(T)                                                                  \
  template void gather_rows<T>(T*, const T*, const int32_t*, const float*, int64_t, int64_t, \
                               cudaStream_t);                                                \
  template void combine_rows<T>(T*, const T*, const int32_t*, const float*, int64_t, int64_t,\
                                int64_t, bool, cudaStream_t);                                \
  template void row_dots<T>(float*, const T*, const T*, const int32_t*, int64_t, int64_t,    \
                            int64_t, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
