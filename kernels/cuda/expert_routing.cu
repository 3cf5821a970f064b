// The router of an MoE layer on the device: the twin of kernels/cpu/expert_routing.cpp (the
// rule in kernels/expert_route.h), in float.
//
// route_tokens: a warp per token, its scores and selection values in shared memory; the top
//   groups and experts by repeated warp-wide argmax (ties to the lower index); the statistics
//   summed per warp in token order, then per block, then over the blocks in order.
// route_rows: a block per expert counts its choices, finds its capacity's threshold gate by
//   building the threshold's bits from the top (gates are >= 0, so their bits order as they
//   do), and lays its kept choices into rows with block-wide scans in choice order.
// route_backward: a warp per token.
// Nothing is summed with atomics: results are deterministic.
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

constexpr int kTokenWarps = 4;
constexpr int kTokenThreads = kTokenWarps * 32;
constexpr int kExpertThreads = 256;

// A candidate of an argmax: the higher value wins, ties go to the lower index; i < 0 is none.
struct Best {
  float v;
  int i;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  return a.v > b.v || (a.v == b.v && a.i < b.i) ? a : b;
}

// The best of values[0, n) over the warp (every lane gets it); `skip` marks taken entries.
template <typename Skip>
__device__ Best warp_best(const float* values, int n, Skip skip) {
  Best b{-INFINITY, -1};
  for (int i = threadIdx.x % 32; i < n; i += 32)
    if (!skip(i)) b = better(b, Best{values[i], i});
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    b = better(b, Best{__shfl_xor_sync(kFullMask, b.v, offset), __shfl_xor_sync(kFullMask, b.i, offset)});
  return b;
}

// The token's scores s [E] from its logits z into shared memory; returns logsumexp(z).
template <typename T>
__device__ float token_scores(const ExpertRoute& r, const T* z, float* s) {
  const int E = static_cast<int>(r.experts), lane = threadIdx.x % 32;
  float top = -INFINITY;
  for (int e = lane; e < E; e += 32) top = fmaxf(top, to_float(z[e]));
  top = warp_max(top);
  float sum = 0;
  for (int e = lane; e < E; e += 32) sum += expf(to_float(z[e]) - top);
  const float lse = top + logf(warp_sum(sum));
  for (int e = lane; e < E; e += 32) {
    const float x = to_float(z[e]);
    s[e] = r.sigmoid ? 1.0f / (1.0f + expf(-x)) : expf(x - lse);
  }
  __syncwarp();
  return lse;
}

// Group-limited routing: the values v [E] of experts outside the token's groups_topk best
// groups become -inf. g [groups]: working space.
__device__ void limit_to_groups(const ExpertRoute& r, float* v, float* g) {
  const int G = static_cast<int>(r.groups), per = static_cast<int>(r.experts / r.groups);
  const int best = static_cast<int>(r.top_k / r.groups_topk), lane = threadIdx.x % 32;
  for (int q = lane; q < G; q += 32) {
    // The sum of the group's `best` highest values, taken in order (value down, index up).
    float total = 0, last = INFINITY;
    int last_i = -1;
    for (int b = 0; b < best; ++b) {
      Best pick{-INFINITY, -1};
      for (int i = 0; i < per; ++i) {
        const float x = v[q * per + i];
        if (x < last || (x == last && i > last_i)) pick = better(pick, Best{x, i});
      }
      total += pick.v;
      last = pick.v;
      last_i = pick.i;
    }
    g[q] = total;
  }
  __syncwarp();
  for (int t = 0; t < r.groups_topk; ++t) {
    const Best pick = warp_best(g, G, [&](int q) { return g[q] == INFINITY; });
    __syncwarp();
    if (lane == 0) g[pick.i] = INFINITY;  // chosen
    __syncwarp();
  }
  for (int e = lane; e < r.experts; e += 32)
    if (g[e / per] != INFINITY) v[e] = -INFINITY;
  __syncwarp();
}

// Shared memory per warp: s [E], v [E], g [E] (group scores, then the chosen experts) and the
// statistics' running sums [E + 2].
__host__ __device__ constexpr int64_t token_floats(int64_t E) { return 4 * E + 2; }

template <typename T>
__global__ void __launch_bounds__(kTokenThreads)
    route_tokens_kernel(int32_t* choice, float* gate, float* partials, const T* logits, const float* bias,
                        int64_t N, ExpertRoute r) {
  extern __shared__ float shared[];
  const int E = static_cast<int>(r.experts), k = static_cast<int>(r.top_k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* s = shared + warp * token_floats(E);
  float* v = s + E;
  float* g = v + E;
  float* sums = g + E;
  int* chosen = reinterpret_cast<int*>(g);
  for (int c = lane; c < E + 2; c += 32) sums[c] = 0;
  for (int64_t n = blockIdx.x * int64_t{kTokenWarps} + warp; n < N; n += int64_t{gridDim.x} * kTokenWarps) {
    const float lse = token_scores(r, logits + n * E, s);
    float score_sum = 0;
    for (int e = lane; e < E; e += 32) {
      v[e] = s[e] + bias[e];
      score_sum += s[e];
    }
    score_sum = warp_sum(score_sum);
    __syncwarp();
    if (r.groups > 1) limit_to_groups(r, v, g);
    float kept = 0;
    for (int j = 0; j < k; ++j) {
      const Best pick = warp_best(v, E, [](int) { return false; });
      kept += s[pick.i];
      __syncwarp();
      if (lane == 0) {
        chosen[j] = pick.i;
        v[pick.i] = -INFINITY;
      }
      __syncwarp();
    }
    const float D = r.normalize ? kept : 1.0f;
    for (int j = lane; j < k; j += 32) {
      choice[n * k + j] = chosen[j];
      gate[n * k + j] = static_cast<float>(r.gate_scale) * s[chosen[j]] / D;
    }
    const float divisor = r.sigmoid ? score_sum : 1.0f;
    float entropy = 0;
    for (int e = lane; e < E; e += 32) {
      const float p = s[e] / divisor;
      sums[e] += p;
      if (p > 0) entropy -= p * logf(p);
    }
    entropy = warp_sum(entropy);
    if (lane == 0) {
      sums[E] += entropy;
      sums[E + 1] += lse * lse;
    }
    __syncwarp();
  }
  __syncthreads();
  for (int c = threadIdx.x; c < E + 2; c += blockDim.x) {
    float total = 0;
    for (int w = 0; w < kTokenWarps; ++w) total += shared[w * token_floats(E) + 3 * E + c];
    partials[blockIdx.x * (E + 2) + c] = total;
  }
}

// stats [E + 2] from the blocks' partial sums, in block order; the last two are means.
__global__ void route_stats_kernel(float* stats, const float* partials, int blocks, int64_t E, int64_t N) {
  for (int64_t c = threadIdx.x; c < E + 2; c += blockDim.x) {
    float total = 0;
    for (int b = 0; b < blocks; ++b) total += partials[b * (E + 2) + c];
    stats[c] = c < E || N == 0 ? total : total / static_cast<float>(N);
  }
}

// Choices of expert e among [0, n) whose gate bits pass `keep`, summed over the block.
template <typename Keep>
__device__ int count_choices(const int32_t* choice, int64_t n, int e, Keep keep) {
  int mine = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mine += choice[i] == e && keep(i);
  return block_sum(mine);
}

// Per expert: its choices and drops into counts, its rows into offsets[e + 1] (summed by
// route_offsets_kernel), and under drop_by_gate over capacity, the gate bits at the
// capacity's edge and how many choices of exactly those bits it keeps.
__global__ void __launch_bounds__(kExpertThreads)
    route_count_kernel(float* counts, int32_t* offsets, uint32_t* edge, int32_t* edge_kept, const int32_t* choice,
                       const float* gate, int64_t N, ExpertRoute r) {
  const int e = blockIdx.x;
  const int64_t n = N * r.top_k, capacity = r.capacity;
  const auto bits = [&](int64_t i) { return __float_as_uint(gate[i]); };
  const int routed = count_choices(choice, n, e, [](int64_t) { return true; });
  int64_t kept = routed;
  uint32_t threshold = 0;
  int ties = 0;
  if (capacity > 0 && routed > capacity) {
    kept = capacity;
    if (r.drop_by_gate) {
      for (int bit = 31; bit >= 0; --bit) {
        const uint32_t candidate = threshold | (1u << bit);
        if (count_choices(choice, n, e, [&](int64_t i) { return bits(i) >= candidate; }) >= capacity)
          threshold = candidate;
      }
      ties = static_cast<int>(capacity) - count_choices(choice, n, e, [&](int64_t i) { return bits(i) > threshold; });
    }
  }
  if (threadIdx.x == 0) {
    counts[e] = static_cast<float>(routed);
    counts[r.experts + e] = static_cast<float>(routed - kept);
    offsets[e + 1] = static_cast<int32_t>(r.pad ? capacity : kept);
    edge[e] = threshold;
    edge_kept[e] = ties;
  }
}

__global__ void route_offsets_kernel(int32_t* offsets, int64_t E) {
  offsets[0] = 0;
  for (int64_t e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
}

// Expert e's kept choices into its rows, in choice order; its padding rows after them.
__global__ void __launch_bounds__(kExpertThreads)
    route_assign_kernel(int32_t* row, int32_t* source, float* row_gate, const int32_t* offsets, const float* counts,
                        const uint32_t* edge, const int32_t* edge_kept, const int32_t* choice, const float* gate,
                        int64_t N, ExpertRoute r) {
  using Scan = cub::BlockScan<int, kExpertThreads>;
  __shared__ typename Scan::TempStorage scan;
  const int e = blockIdx.x;
  const int64_t n = N * r.top_k, capacity = r.capacity, first = offsets[e];
  const bool over = capacity > 0 && counts[e] > static_cast<float>(capacity);
  int seen = 0, tied = 0, kept = 0;  // before this tile, over the block
  for (int64_t base = 0; base < n; base += kExpertThreads) {
    const int64_t i = base + threadIdx.x;
    const bool mine = i < n && choice[i] == e;
    const uint32_t bits = mine ? __float_as_uint(gate[i]) : 0;
    const bool tie = mine && over && r.drop_by_gate && bits == edge[e];
    int position, tie_position, slot, total;
    Scan(scan).ExclusiveSum(mine ? 1 : 0, position, total);
    position += seen;
    seen += total;
    __syncthreads();
    Scan(scan).ExclusiveSum(tie ? 1 : 0, tie_position, total);
    tie_position += tied;
    tied += total;
    __syncthreads();
    const bool keep = mine && (!over || (r.drop_by_gate ? bits > edge[e] || (tie && tie_position < edge_kept[e])
                                                        : position < capacity));
    Scan(scan).ExclusiveSum(keep ? 1 : 0, slot, total);
    slot += kept;
    kept += total;
    __syncthreads();
    if (mine) row[i] = keep ? static_cast<int32_t>(first + slot) : -1;
    if (keep) {
      source[first + slot] = static_cast<int32_t>(i / r.top_k);
      row_gate[first + slot] = gate[i];
    }
  }
  for (int64_t q = first + kept + threadIdx.x; q < offsets[e + 1]; q += kExpertThreads) {
    source[q] = -1;
    row_gate[q] = 0;
  }
}

template <typename T>
__global__ void __launch_bounds__(kTokenThreads)
    route_backward_kernel(T* d_logits, const float* d_gate, const T* logits, const int32_t* choice,
                          const float* shares, int64_t N, ExpertRoute r, RouteLoss loss) {
  extern __shared__ float shared[];
  const int64_t n = warp_row();
  if (n >= N) return;
  const int E = static_cast<int>(r.experts), k = static_cast<int>(r.top_k), lane = threadIdx.x % 32;
  float* s = shared + (threadIdx.x / 32) * 2 * E;
  float* ds = s + E;
  const T* z = logits + n * E;
  const int32_t* chosen = choice + n * k;
  const float* dg = d_gate + n * k;
  const float lse = token_scores(r, z, s);
  // The balancing loss through the probabilities (sigmoid ones are normalised scores): d
  // balance / d p[n, e] is the same for every token.
  const float per_choice = 1.0f / static_cast<float>(loss.tokens * r.top_k);
  const float d_probs_scale = static_cast<float>(loss.balance) * static_cast<float>(E) * per_choice / static_cast<float>(N);
  float score_sum = 0, through_probs = 0;
  for (int e = lane; e < E; e += 32) {
    score_sum += s[e];
    through_probs += d_probs_scale * shares[e] * s[e];
  }
  const float divisor = r.sigmoid ? warp_sum(score_sum) : 1.0f;
  through_probs = r.sigmoid ? warp_sum(through_probs) / divisor : 0.0f;
  for (int e = lane; e < E; e += 32) ds[e] = (d_probs_scale * shares[e] - through_probs) / divisor;
  // The gates: g_j = c s[e_j] / D, c the gate scale, D the chosen scores' sum when normalising.
  float kept = 0, through_sum = 0;
  for (int j = 0; j < k; ++j) kept += s[chosen[j]];
  const float D = r.normalize ? kept : 1.0f, c = static_cast<float>(r.gate_scale);
  if (r.normalize)
    for (int j = 0; j < k; ++j) through_sum += dg[j] * (c * s[chosen[j]] / D);
  __syncwarp();
  if (lane == 0)
    for (int j = 0; j < k; ++j) ds[chosen[j]] += (c * dg[j] - through_sum) / D;
  __syncwarp();
  // Scores to logits, then the z-loss: d lse^2 / dz = 2 lse softmax(z).
  float dot = 0;
  for (int e = lane; e < E; e += 32) dot += ds[e] * s[e];
  dot = warp_sum(dot);
  const float zc = static_cast<float>(loss.z) * 2 * lse / static_cast<float>(N);
  for (int e = lane; e < E; e += 32) {
    const float through_scores = r.sigmoid ? ds[e] * s[e] * (1 - s[e]) : s[e] * (ds[e] - dot);
    d_logits[n * E + e] = from_float<T>(through_scores + zc * expf(to_float(z[e]) - lse));
  }
}

// tally += (E / (N T k) * sum_e P_e c_e, 1).
__global__ void route_tally_kernel(float* tally, const float* stats, const float* shares, int64_t N,
                                     int64_t E, RouteLoss loss, int64_t k) {
  float value = 0;
  for (int64_t e = threadIdx.x; e < E; e += 32)
    value += static_cast<float>(E) * (stats[e] / static_cast<float>(N)) * shares[e] /
             static_cast<float>(loss.tokens * k);
  value = warp_sum(value);
  if (threadIdx.x == 0) {
    tally[0] += value;
    tally[1] += 1;
  }
}

}  // namespace

size_t route_scratch_bytes() {
  return kRouteBlocks * (kMostRoutedExperts + 2) * sizeof(float) + kMostRoutedExperts * 2 * sizeof(uint32_t);
}

template <typename T>
void route_tokens(int32_t* choice, float* gate, float* stats, const T* logits, const float* bias, int64_t N,
                  const ExpertRoute& route, void* scratch, cudaStream_t stream) {
  const int64_t E = route.experts;
  float* partials = static_cast<float*>(scratch);
  const unsigned blocks = blocks_for(N, kTokenWarps, kRouteBlocks);
  const size_t shared = kTokenWarps * token_floats(E) * sizeof(float);
  route_tokens_kernel<T><<<blocks, kTokenThreads, shared, stream>>>(choice, gate, partials, logits, bias, N, route);
  KILN_CUDA_CHECK_LAUNCH("route_tokens_kernel");
  route_stats_kernel<<<1, 256, 0, stream>>>(stats, partials, static_cast<int>(blocks), E, N);
  KILN_CUDA_CHECK_LAUNCH("route_stats_kernel");
}

void route_rows(int32_t* row, int32_t* source, float* row_gate, int32_t* offsets, float* counts,
                const int32_t* choice, const float* gate, int64_t N, const ExpertRoute& route, void* scratch,
                cudaStream_t stream) {
  const int64_t E = route.experts;
  uint32_t* edge = reinterpret_cast<uint32_t*>(static_cast<float*>(scratch) + kRouteBlocks * (kMostRoutedExperts + 2));
  int32_t* edge_kept = reinterpret_cast<int32_t*>(edge + kMostRoutedExperts);
  route_count_kernel<<<static_cast<unsigned>(E), kExpertThreads, 0, stream>>>(counts, offsets, edge, edge_kept,
                                                                                choice, gate, N, route);
  KILN_CUDA_CHECK_LAUNCH("route_count_kernel");
  route_offsets_kernel<<<1, 1, 0, stream>>>(offsets, E);
  KILN_CUDA_CHECK_LAUNCH("route_offsets_kernel");
  route_assign_kernel<<<static_cast<unsigned>(E), kExpertThreads, 0, stream>>>(
      row, source, row_gate, offsets, counts, edge, edge_kept, choice, gate, N, route);
  KILN_CUDA_CHECK_LAUNCH("route_assign_kernel");
}

template <typename T>
void route_backward(T* d_logits, float* tally, const float* d_gate, const T* logits, const int32_t* choice,
                    const float* stats, const float* shares, int64_t N, const ExpertRoute& route,
                    const RouteLoss& loss, cudaStream_t stream) {
  if (N <= 0) return;
  const size_t shared = kTokenWarps * 2 * route.experts * sizeof(float);
  route_backward_kernel<T><<<blocks_for(N, kTokenWarps), kTokenThreads, shared, stream>>>(d_logits, d_gate, logits,
                                                                                         choice, shares, N, route, loss);
  KILN_CUDA_CHECK_LAUNCH("route_backward_kernel");
  if (!tally) return;
  route_tally_kernel<<<1, 32, 0, stream>>>(tally, stats, shares, N, route.experts, loss, route.top_k);
  KILN_CUDA_CHECK_LAUNCH("route_tally_kernel");
}

#define KILN_ROUTE(T)                                                                                          \
  template void route_tokens<T>(int32_t*, float*, float*, const T*, const float*, int64_t, const ExpertRoute&, \
                                void*, cudaStream_t);                                                         \
  template void route_backward<T>(T*, float*, const float*, const T*, const int32_t*, const float*,            \
                                  const float*, int64_t, const ExpertRoute&, const RouteLoss&, cudaStream_t);
KILN_ROUTE(float)
KILN_ROUTE(__nv_bfloat16)
KILN_ROUTE(__half)
#undef KILN_ROUTE

}  // namespace kiln::cuda
