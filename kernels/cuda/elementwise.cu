// Elementwise ops, reductions and bias handling: the twins of kernels/cpu/elementwise.cpp.
//
// fill, add, scale, cast: flat grid-stride maps over 16-byte packs (map_kernel), the tail
//   element by element.
// add_bias: one warp per row, lanes stride the row in packs.
// bias_backward: column_sums_kernel (deterministic, no atomics).
// sum_squares: two passes over a fixed grid, so the bits never depend on the device or on
//   timing: 1024 blocks each write a partial sum (float per pack, double per thread and
//   block) to the caller's array of partials, then one block adds them in block order and
//   adds the total to the sum. Nothing comes back to the host, so a captured step holds it.
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
struct FillOp {
  T* x;
  float value;
  template <int W>
  __device__ void apply(int64_t i) const {
    float v[W];
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = value;
    store_float(x + i, v);
  }
};

template <typename T>
struct AddOp {
  T* out;
  const T* a;
  const T* b;
  template <int W>
  __device__ void apply(int64_t i) const {
    float x[W], y[W];
    load_float(x, a + i);
    load_float(y, b + i);
#pragma unroll
    for (int k = 0; k < W; ++k) x[k] += y[k];
    store_float(out + i, x);
  }
};

struct ScaleOp {
  float* x;
  float factor;
  template <int W>
  __device__ void apply(int64_t i) const {
    float v[W];
    load_float(v, x + i);
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] *= factor;
    store_float(x + i, v);
  }
};

// Through float: exact for every source type, then one round-to-nearest-even.
template <typename To, typename From>
struct CastOp {
  To* out;
  const From* x;
  template <int W>
  __device__ void apply(int64_t i) const {
    float v[W];
    load_float(v, x + i);
    store_float(out + i, v);
  }
};

// ---- sum of squares ----------------------------------------------------------------------

constexpr int kSumBlocks = kSumSquaresPartials;
constexpr int kSumThreads = 256;

template <int P>
__global__ void __launch_bounds__(kSumThreads)
    sum_squares_partial_kernel(const float* x, int64_t n, double* partials) {
  const int64_t stride = static_cast<int64_t>(kSumBlocks) * kSumThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kSumThreads + threadIdx.x;
  double acc = 0;
  for (int64_t i = first; i < n / P; i += stride) {
    float v[P];
    load_float(v, x + i * P);
    float s = 0;
#pragma unroll
    for (int k = 0; k < P; ++k) s += v[k] * v[k];
    acc += s;
  }
  for (int64_t i = n / P * P + first; i < n; i += stride) acc += static_cast<double>(x[i]) * x[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kSumBlocks) sum_squares_final_kernel(const double* partials, double* sum) {
  const double total = block_sum(partials[threadIdx.x]);
  if (threadIdx.x == 0) *sum += total;
}

// ---- bias ----------------------------------------------------------------------------------

constexpr int kRowWarps = 8;  // rows per block in the warp-per-row kernels

// out[n, :] += bias: one warp per row, lanes stride the row in packs of P.
template <typename T, int P>
__global__ void __launch_bounds__(kRowWarps * 32)
    add_bias_kernel(T* out, const T* bias, int64_t N, int64_t C) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (n >= N) return;
  T* row = out + n * C;
  for (int c = lane * P; c < C; c += 32 * P) {
    float o[P], b[P];
    load_float(o, row + c);
    load_float(b, bias + c);
#pragma unroll
    for (int k = 0; k < P; ++k) o[k] += b[k];
    store_float(row + c, o);
  }
}

// Element i of the part [N, c] and its place in the whole [N, C], at columns [first, first + c).
template <typename T>
struct ColumnsOp {
  T* out;
  const T* x;
  int64_t C, c, first;
  float factor;
  bool into_whole;  // add_columns: whole += factor * part; else part = factor * whole
  template <int W>
  __device__ void apply(int64_t i) const {
    const int64_t whole = i / c * C + first + i % c;
    if (into_whole) out[whole] = from_float<T>(to_float(out[whole]) + factor * to_float(x[i]));
    else out[i] = from_float<T>(factor * to_float(x[whole]));
  }
};

// One thread per value of out's blocks (one block's values when the heads sum into it, each
// summing its column over the heads in order).
template <typename T>
struct HeadColumnsOp {
  T* out;
  const T* x;
  int64_t out_cols, x_cols;
  HeadColumns k;
  int64_t out_heads;  // the blocks of out: 1 when they sum
  template <int W>
  __device__ void apply(int64_t i) const {
    const int64_t per_row = out_heads * k.width, n = i / per_row, h = i % per_row / k.width, c = i % k.width;
    const T* row = x + n * x_cols + k.x_first + c;
    float v = 0;
    if (k.out_stride == 0) {
      for (int64_t j = 0; j < k.heads; ++j) v += to_float(row[j * k.x_stride]);
    } else {
      v = to_float(row[h * k.x_stride]);
    }
    out[n * out_cols + k.out_first + h * k.out_stride + c] = from_float<T>(v);
  }
};

template <typename T>
struct BiasGrad {
  const T* dout;
  int64_t C;
  template <int P, int K>
  __device__ void operator()(int64_t n, int64_t c, float (&acc)[K][P]) const {
    float d[P];
    load_float(d, dout + n * C + c);
#pragma unroll
    for (int k = 0; k < P; ++k) acc[0][k] += d[k];
  }
};

}  // namespace

template <typename T>
void fill(T* x, int64_t n, float value, cudaStream_t stream) {
  with_pack<T>(can_pack<kPack<T>>(0, x), [&](auto p) {
    launch_map<decltype(p)::value>(n, FillOp<T>{x, value}, stream);
  });
}

template <typename T>
void add(T* out, const T* a, const T* b, int64_t n, cudaStream_t stream) {
  with_pack<T>(can_pack<kPack<T>>(0, out, a, b), [&](auto p) {
    launch_map<decltype(p)::value>(n, AddOp<T>{out, a, b}, stream);
  });
}

void scale(float* x, int64_t n, float factor, cudaStream_t stream) {
  with_pack<float>(can_pack<kPack<float>>(0, x), [&](auto p) {
    launch_map<decltype(p)::value>(n, ScaleOp{x, factor}, stream);
  });
}

void sum_squares(const float* x, int64_t n, double* partials, double* sum, cudaStream_t stream) {
  if (can_pack<4>(0, x)) {
    sum_squares_partial_kernel<4><<<kSumBlocks, kSumThreads, 0, stream>>>(x, n, partials);
  } else {
    sum_squares_partial_kernel<1><<<kSumBlocks, kSumThreads, 0, stream>>>(x, n, partials);
  }
  KILN_CUDA_CHECK_LAUNCH("sum_squares_partial_kernel");
  sum_squares_final_kernel<<<1, kSumBlocks, 0, stream>>>(partials, sum);
  KILN_CUDA_CHECK_LAUNCH("sum_squares_final_kernel");
}

template <typename To, typename From>
void cast(To* out, const From* x, int64_t n, cudaStream_t stream) {
  // Packs of 16 bytes of the narrower type (8 elements when either side is 16-bit).
  constexpr int P = sizeof(To) < sizeof(From) ? kPack<To> : kPack<From>;
  if (can_pack<P>(0, out, x)) {
    launch_map<P>(n, CastOp<To, From>{out, x}, stream);
  } else {
    launch_map<1>(n, CastOp<To, From>{out, x}, stream);
  }
}

template <typename T>
void add_bias(T* out, const T* bias, int64_t N, int64_t C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  with_pack<T>(can_pack<kPack<T>>(C, out, bias), [&](auto p) {
    add_bias_kernel<T, decltype(p)::value>
        <<<blocks_for(N, kRowWarps), kRowWarps * 32, 0, stream>>>(out, bias, N, C);
    KILN_CUDA_CHECK_LAUNCH("add_bias_kernel");
  });
}

template <typename T>
void add_columns(T* out, const T* x, int64_t N, int64_t C, int64_t c, int64_t first, float factor,
                 cudaStream_t stream) {
  launch_map<1>(N * c, ColumnsOp<T>{out, x, C, c, first, factor, true}, stream);
}

template <typename T>
void take_columns(T* out, const T* x, int64_t N, int64_t C, int64_t c, int64_t first, float factor,
                  cudaStream_t stream) {
  launch_map<1>(N * c, ColumnsOp<T>{out, x, C, c, first, factor, false}, stream);
}

template <typename T>
void copy_head_columns(T* out, const T* x, int64_t N, int64_t out_cols, int64_t x_cols, const HeadColumns& columns,
                       cudaStream_t stream) {
  const int64_t out_heads = columns.out_stride == 0 ? 1 : columns.heads;
  launch_map<1>(N * out_heads * columns.width, HeadColumnsOp<T>{out, x, out_cols, x_cols, columns, out_heads}, stream);
}

template <typename T>
void bias_backward(float* dbias, const T* dout, int64_t N, int64_t C, cudaStream_t stream) {
  with_pack<T>(can_pack<kPack<T>>(C, dout), [&](auto p) {
    launch_column_sums<decltype(p)::value, 1>(dbias, nullptr, N, C, BiasGrad<T>{dout, C}, stream);
  });
}

#define KILN_INSTANTIATE(T)                                                              \
  template void fill<T>(T*, int64_t, float, cudaStream_t);                               \
  template void add<T>(T*, const T*, const T*, int64_t, cudaStream_t);                   \
  template void add_bias<T>(T*, const T*, int64_t, int64_t, cudaStream_t);               \
  template void add_columns<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, float, cudaStream_t); \
  template void take_columns<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, float, cudaStream_t); \
  template void copy_head_columns<T>(T*, const T*, int64_t, int64_t, int64_t, const HeadColumns&, cudaStream_t); \
  template void bias_backward<T>(float*, const T*, int64_t, int64_t, cudaStream_t);      \
  template void cast<T, float>(T*, const float*, int64_t, cudaStream_t);                 \
  template void cast<T, __nv_bfloat16>(T*, const __nv_bfloat16*, int64_t, cudaStream_t); \
  template void cast<T, __half>(T*, const __half*, int64_t, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
