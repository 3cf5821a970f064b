// Token (and learned position) embedding: the twin of kernels/cpu/embedding.cpp.
//
// Forward: one warp per token row, lanes stride the C channels in packs of P:
//   out[n] = wte[tokens[n]] (+ wpe[p]), p = positions[n], or n % seq without positions.
// Backward, deterministic, no atomics on the gradients:
//   dwte: the token ids of a window of up to 64K tokens are sorted with their positions
//     (cub's radix sort, stable and deterministic), so every id becomes one run of sorted
//     positions in token order. scatter_runs_kernel then gives each run to one warp per
//     channel chunk (32 lanes x P channels), which adds dout[position] into a register copy
//     of the dwte row in token order - the CPU's order - and writes the row back once. No two
//     runs share a row, so nothing races. Runs longer than kHeavyRun (frequent ids) are split
//     over the 8 warps of the block and their partial sums added in warp order.
//   dwpe: one warp per position t, lanes over channels, adding dout[b, t] for b in order;
//     with per-token positions, which may repeat anywhere in the batch, the positions are
//     ids into dwpe and take the sorted-runs path of dwte.
//
// Scratch: the sort's keys, positions and temporary storage are static device arrays
// (about 2 MB, allocated with the module), so a call allocates nothing; as a consequence two
// embedding_backward calls must not run at the same time on one device (the CUDA backend
// runs every op on one stream). Ids outside [0, vocab_rows) (positions outside
// [0, position_rows)) contribute nothing.
#include <cub/device/device_radix_sort.cuh>

#include "base/check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kRowWarps = 8;
constexpr int kRowThreads = kRowWarps * 32;

// ---- forward --------------------------------------------------------------------------------

template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    embedding_forward_kernel(T* out, const int32_t* tokens, const int32_t* positions, const T* wte,
                             const T* wpe, int64_t N, int64_t seq, int64_t C, int64_t vocab_rows) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (n >= N) return;
  // An id outside the table (another vocabulary-parallel rank's) gives a zero row.
  const bool inside = tokens[n] >= 0 && tokens[n] < vocab_rows;
  const T* tok = inside ? wte + static_cast<int64_t>(tokens[n]) * C : nullptr;
  const T* pos = wpe ? wpe + position_of(positions, n, seq) * C : nullptr;
  T* o = out + n * C;
  for (int c = lane * P; c < C; c += 32 * P) {
    float v[P] = {};
    if (tok) load_float(v, tok + c);
    if (pos) {
      float w[P];
      load_float(w, pos + c);
#pragma unroll
      for (int k = 0; k < P; ++k) v[k] += w[k];
    }
    store_float(o + c, v);
  }
}

// ---- dwte (and dwpe with positions) -----------------------------------------------------------

constexpr int kSortWindow = 1 << 16;                // tokens sorted at once
constexpr size_t kSortTempBytes = size_t{1} << 20;  // cub needs a few KB at this size
constexpr int kHeavyRun = 64;                       // longer runs are split over the block's warps

__device__ uint32_t g_sort_keys[2][kSortWindow];
__device__ int32_t g_sort_positions[2][kSortWindow];
__device__ __align__(256) unsigned char g_sort_temp[kSortTempBytes];

// keys[i] = tokens[n0 + i] (ids outside the vocabulary become `invalid`, sorting last),
// positions[i] = n0 + i.
__global__ void sort_input_kernel(uint32_t* keys, int32_t* positions, const int32_t* tokens,
                                  int64_t n0, int count, uint32_t invalid) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const int32_t t = tokens[n0 + i];
  keys[i] = t >= 0 && static_cast<uint32_t>(t) < invalid ? static_cast<uint32_t>(t) : invalid;
  positions[i] = static_cast<int32_t>(n0 + i);
}

// Length of the run of `key` that starts at sorted index `first` (warp-wide, all lanes).
__device__ int run_length(const uint32_t* keys, int first, int count, uint32_t key) {
  for (int j0 = first + 1;; j0 += 32) {
    const int j = j0 + threadIdx.x % 32;
    const unsigned ends = __ballot_sync(kFullMask, j >= count || keys[j] != key);
    if (ends) return j0 + __ffs(ends) - 1 - first;
  }
}

// Adds the runs of sorted ids into their rows of table (dwte, or dwpe with positions).
// Block: 256 sorted indices x one chunk of 32 * P channels (blockIdx.y). Warp w looks for the
// runs that start at its 32 indices; lane l owns channels [chunk + l * P, + P).
template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    scatter_runs_kernel(float* table, const T* dout, const uint32_t* keys, const int32_t* positions,
                        int count, int64_t C, uint32_t invalid) {
  constexpr int kMaxHeavy = kRowThreads / (kHeavyRun + 1) + 1;  // disjoint runs > kHeavyRun
  __shared__ int heavy_first[kMaxHeavy], heavy_length[kMaxHeavy];
  __shared__ int heavy_count;
  __shared__ float heavy_partial[kRowWarps][32 * P];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * 32 * P + lane * P;
  const bool owns_channels = c < C;
  if (threadIdx.x == 0) heavy_count = 0;
  __syncthreads();

  const int i = blockIdx.x * kRowThreads + threadIdx.x;
  const bool starts_run = i < count && keys[i] != invalid && (i == 0 || keys[i - 1] != keys[i]);
  for (unsigned starts = __ballot_sync(kFullMask, starts_run); starts; starts &= starts - 1) {
    const int first = blockIdx.x * kRowThreads + warp * 32 + __ffs(starts) - 1;
    const uint32_t key = keys[first];
    const int length = run_length(keys, first, count, key);
    if (length > kHeavyRun) {  // at most kMaxHeavy such runs start in this block
      if (lane == 0) {
        const int slot = atomicAdd(&heavy_count, 1);  // slot order does not change any sum
        heavy_first[slot] = first;
        heavy_length[slot] = length;
      }
      continue;
    }
    if (owns_channels) {  // no early continue: the lanes stay converged for run_length
      float* row = table + static_cast<int64_t>(key) * C + c;
      float acc[P], d[P];
      load_float(acc, row);
#pragma unroll 4
      for (int j = first; j < first + length; ++j) {
        load_float(d, dout + static_cast<int64_t>(positions[j]) * C + c);
#pragma unroll
        for (int k = 0; k < P; ++k) acc[k] += d[k];
      }
      store_float(row, acc);
    }
  }
  __syncthreads();

  for (int h = 0; h < heavy_count; ++h) {
    const int first = heavy_first[h], length = heavy_length[h];
    float acc[P] = {}, d[P];
    if (owns_channels) {
#pragma unroll 4
      for (int j = first + warp; j < first + length; j += kRowWarps) {
        load_float(d, dout + static_cast<int64_t>(positions[j]) * C + c);
#pragma unroll
        for (int k = 0; k < P; ++k) acc[k] += d[k];
      }
    }
#pragma unroll
    for (int k = 0; k < P; ++k) heavy_partial[warp][lane * P + k] = acc[k];
    __syncthreads();
    if (warp == 0 && owns_channels) {
      float* row = table + static_cast<int64_t>(keys[first]) * C + c;
      load_float(acc, row);
      for (int w = 0; w < kRowWarps; ++w)
#pragma unroll
        for (int k = 0; k < P; ++k) acc[k] += heavy_partial[w][lane * P + k];
      store_float(row, acc);
    }
    __syncthreads();
  }
}

// ---- dwpe -------------------------------------------------------------------------------------

// dwpe[t] += sum over b of dout[b * seq + t], b in order: one warp per position t.
template <typename T, int P>
__global__ void __launch_bounds__(kRowThreads)
    wpe_backward_kernel(float* dwpe, const T* dout, int64_t B, int64_t seq, int64_t C) {
  const int lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (t >= seq) return;
  for (int c = lane * P; c < C; c += 32 * P) {
    float acc[P], d[P];
    load_float(acc, dwpe + t * C + c);
    for (int64_t b = 0; b < B; ++b) {
      load_float(d, dout + (b * seq + t) * C + c);
#pragma unroll
      for (int k = 0; k < P; ++k) acc[k] += d[k];
    }
    store_float(dwpe + t * C + c, acc);
  }
}

template <typename E, typename V>
E* symbol_address(const V& symbol) {
  void* p = nullptr;
  KILN_CUDA_CHECK(cudaGetSymbolAddress(&p, symbol));
  return static_cast<E*>(p);
}

// table[ids[n]] += dout[n] for n < N, each row summed in token order: the sort windows and
// scatter_runs_kernel above. Ids outside [0, rows) contribute nothing.
template <typename T>
void scatter_add_rows(float* table, const int32_t* ids, const T* dout, int64_t N, int64_t C,
                      int64_t rows, bool packed, cudaStream_t stream) {
  KILN_CHECK(rows > 0 && rows < (int64_t{1} << 32) - 1 && N < (int64_t{1} << 31),
             "embedding_backward: table rows or token count out of range");
  const auto invalid = static_cast<uint32_t>(rows);  // sorts after every valid id
  int end_bit = 1;                                   // the bits of `invalid`
  while (end_bit < 32 && (uint64_t{1} << end_bit) <= invalid) ++end_bit;
  auto* keys = symbol_address<uint32_t>(g_sort_keys);
  auto* positions = symbol_address<int32_t>(g_sort_positions);
  auto* temp = symbol_address<unsigned char>(g_sort_temp);

  for (int64_t n0 = 0; n0 < N; n0 += kSortWindow) {  // windows in token order
    const int count = static_cast<int>(std::min<int64_t>(kSortWindow, N - n0));
    sort_input_kernel<<<blocks_for(count, 256), 256, 0, stream>>>(keys, positions, ids, n0,
                                                                  count, invalid);
    KILN_CUDA_CHECK_LAUNCH("sort_input_kernel");
    cub::DoubleBuffer<uint32_t> sorted_keys(keys, keys + kSortWindow);
    cub::DoubleBuffer<int32_t> sorted_positions(positions, positions + kSortWindow);
    size_t temp_bytes = 0;
    KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, sorted_keys,
                                                    sorted_positions, count, 0, end_bit, stream));
    KILN_CHECK(temp_bytes <= kSortTempBytes, "embedding_backward: the sort needs " +
                                                 std::to_string(temp_bytes) +
                                                 " bytes of scratch, more than the " +
                                                 std::to_string(kSortTempBytes) + " reserved");
    KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, sorted_keys, sorted_positions,
                                                    count, 0, end_bit, stream));
    with_pack<T>(packed, [&](auto p) {
      constexpr int P = decltype(p)::value;
      const dim3 grid(blocks_for(count, kRowThreads),
                      static_cast<unsigned>((C + 32 * P - 1) / (32 * P)));
      scatter_runs_kernel<T, P><<<grid, kRowThreads, 0, stream>>>(
          table, dout, sorted_keys.Current(), sorted_positions.Current(), count, C, invalid);
      KILN_CUDA_CHECK_LAUNCH("scatter_runs_kernel");
    });
  }
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const int32_t* positions, const T* wte,
                       const T* wpe, int64_t B, int64_t seq, int64_t C, int64_t vocab_rows,
                       cudaStream_t stream) {
  const int64_t N = B * seq;
  if (N <= 0 || C <= 0) return;
  with_pack<T>(can_pack<kPack<T>>(C, out, wte, wpe), [&](auto p) {
    embedding_forward_kernel<T, decltype(p)::value>
        <<<blocks_for(N, kRowWarps), kRowThreads, 0, stream>>>(out, tokens, positions, wte, wpe,
                                                               N, seq, C, vocab_rows);
    KILN_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
  });
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const int32_t* tokens, const int32_t* positions,
                        const T* dout, int64_t B, int64_t seq, int64_t C, int64_t vocab_rows,
                        int64_t position_rows, cudaStream_t stream) {
  const int64_t N = B * seq;
  if (N <= 0 || C <= 0) return;
  const bool packed = can_pack<kPack<T>>(C, dout, dwte, dwpe);
  scatter_add_rows(dwte, tokens, dout, N, C, vocab_rows, packed, stream);
  if (dwpe && positions) {
    scatter_add_rows(dwpe, positions, dout, N, C, position_rows, packed, stream);
  } else if (dwpe) {
    with_pack<T>(packed, [&](auto p) {
      wpe_backward_kernel<T, decltype(p)::value>
          <<<blocks_for(seq, kRowWarps), kRowThreads, 0, stream>>>(dwpe, dout, B, seq, C);
      KILN_CUDA_CHECK_LAUNCH("wpe_backward_kernel");
    });
  }
}

#define KILN_INSTANTIATE(T)                                                                       \
  template void embedding_forward<T>(T*, const int32_t*, const int32_t*, const T*, const T*,      \
                                     int64_t, int64_t, int64_t, int64_t, cudaStream_t);           \
  template void embedding_backward<T>(float*, float*, const int32_t*, const int32_t*, const T*,   \
                                      int64_t, int64_t, int64_t, int64_t, int64_t, cudaStream_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(__nv_bfloat16)
KILN_INSTANTIATE(__half)
#undef KILN_INSTANTIATE

}  // namespace kiln::cuda
