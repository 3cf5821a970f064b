// The CUDA bodies of the op table (kernels/ops.h), each the twin of a CPU body in
// kernels/cpu/kernels.h and tested against it (kernels/cuda/cuda_ops_test.cpp).
//
// Types: T is the activation and parameter type (float, __nv_bfloat16 or __half). Norm
// statistics, log-sum-exps and losses are float; parameter gradients (`dweight`, `dbias`,
// `dwte`, `dwpe`) are float accumulators (+=), as Megatron's main_grad; all arithmetic
// that reduces (norm statistics, softmax, loss, gradient sums) runs in float. Every
// function launches on `stream` and returns without synchronising.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/counter_random.h"
#include "kernels/dropout_mask.h"
#include "kernels/expert_route.h"
#include "kernels/head_columns.h"
#include "kernels/optimizer_scalars.h"

namespace kiln::cuda {

struct HeadLayout {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // the trailing dims of a head RoPE turns (AttentionShape::rotated_dim)
  int64_t qkv_width() const { return (n_head + 2 * n_kv_head) * head_dim; }
};

// ---- elementwise and reductions (kernels/cuda/elementwise.cu) ---------------------------
template <typename T> void fill(T* x, int64_t n, float value, cudaStream_t stream);
// Ops::fill_normal (kernels/cuda/fill_normal.cu).
template <typename T>
void fill_normal(T* x, const RandomRuns& runs, uint64_t seed, uint64_t stream, double mean, double std,
                 cudaStream_t s);
template <typename T> void add(T* out, const T* a, const T* b, int64_t n, cudaStream_t stream);
void scale(float* x, int64_t n, float factor, cudaStream_t stream);
// *sum += sum(x^2) (accumulated in float per pack, then double), through `partials`
// (kSumSquaresPartials doubles of device memory the caller owns: calls on one stream take
// turns with them).
constexpr int kSumSquaresPartials = 1024;
void sum_squares(const float* x, int64_t n, double* partials, double* sum, cudaStream_t stream);
// out = x, converting between any two floating types.
template <typename To, typename From>
void cast(To* out, const From* x, int64_t n, cudaStream_t stream);
template <typename T>
void add_bias(T* out, const T* bias, int64_t N, int64_t C, cudaStream_t stream);
template <typename T>
void bias_backward(float* dbias, const T* dout, int64_t N, int64_t C, cudaStream_t stream);
// Columns [first, first + c) of out[N, C] += factor * x[N, c]; out[N, c] = factor * those of x[N, C].
template <typename T>
void add_columns(T* out, const T* x, int64_t N, int64_t C, int64_t c, int64_t first, float factor,
                 cudaStream_t stream);
// Ops::copy_head_columns over rows of out_cols and x_cols values.
template <typename T>
void copy_head_columns(T* out, const T* x, int64_t N, int64_t out_cols, int64_t x_cols, const HeadColumns& columns,
                       cudaStream_t stream);
template <typename T>
void take_columns(T* out, const T* x, int64_t N, int64_t C, int64_t c, int64_t first, float factor,
                  cudaStream_t stream);
// Ops::dropout on out[N, C] and x[N, C] (kernels/cuda/dropout.cu).
template <typename T>
void dropout(T* out, const T* x, int64_t N, int64_t C, const DropoutMask& mask, bool accumulate, cudaStream_t stream);

// ---- embedding (kernels/cuda/embedding.cu) --------------------------------------------
// positions (here and below): null, or the position of each of the B * seq tokens.
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const int32_t* positions, const T* wte,
                       const T* wpe, int64_t B, int64_t seq, int64_t C, int64_t vocab_rows,
                       cudaStream_t stream);
// Deterministic: no atomics on the hot path (tokens sorted or grouped per id). vocab_rows and
// position_rows: the rows of dwte and dwpe.
template <typename T>
void embedding_backward(float* dwte, float* dwpe, const int32_t* tokens, const int32_t* positions,
                        const T* dout, int64_t B, int64_t seq, int64_t C, int64_t vocab_rows,
                        int64_t position_rows, cudaStream_t stream);

// ---- normalisation (kernels/cuda/norm.cu) ---------------------------------------------
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* x, const T* weight,
                       const T* bias, int64_t N, int64_t C, float eps, cudaStream_t stream);
// dx += ...; dweight, dbias += ... (float).
template <typename T>
void layernorm_backward(T* dx, float* dweight, float* dbias, const T* dout, const T* x,
                        const T* weight, const float* mean, const float* rstd, int64_t N,
                        int64_t C, cudaStream_t stream);
template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                     float eps, cudaStream_t stream);
template <typename T>
void rmsnorm_backward(T* dx, float* dweight, const T* dout, const T* x, const T* weight,
                      const float* rstd, int64_t N, int64_t C, cudaStream_t stream);

// ---- activations (kernels/cuda/activation.cu) -------------------------------------------
template <typename T> void gelu_forward(T* out, const T* x, int64_t n, cudaStream_t stream);
template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, int64_t n, cudaStream_t stream);
template <typename T>
void swiglu_forward(T* out, const T* x, int64_t N, int64_t F, cudaStream_t stream);
template <typename T>
void swiglu_backward(T* dx, const T* x, const T* dout, int64_t N, int64_t F, cudaStream_t stream);

// ---- attention (kernels/cuda/rope.cu, kernels/cuda/attention.cu) -----------------------
// table: [P, head_dim/2, 2] float (cos, sin) by position, P above every position used.
// inverse: the backward rotation.
template <typename T>
void rope(T* qkv, const float* table, const int32_t* positions, const HeadLayout& layout,
          bool inverse, cudaStream_t stream);
// Flash-attention style: tiles in shared memory, online softmax, only lse[B, H, T] stored.
// key_starts (here and in backward): null (causal), or the first key each query attends to.
template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, const int32_t* key_starts,
                       const HeadLayout& layout, cudaStream_t stream);
// dqkv overwritten; it must not alias qkv, dout or out. workspace:
// attention_backward_workspace_bytes(layout) bytes, 4-byte aligned, overlapping nothing.
// Head dims: 32, 64, 80, 96, 128 (attention_head_dim_supported).
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse,
                        const int32_t* key_starts, const HeadLayout& layout, void* workspace,
                        cudaStream_t stream);
size_t attention_backward_workspace_bytes(const HeadLayout& layout);
// Ops::attention_decode (kernels/cuda/attention_decode.cu): layout.seq new positions per
// sequence, caches [batch, capacity, n_kv_head * head_dim]; head dims up to 256.
template <typename T>
void attention_decode(T* out, T* k_cache, T* v_cache, const T* qkv, const HeadLayout& layout,
                      int64_t capacity, int64_t pos, cudaStream_t stream);
inline bool attention_head_dim_supported(int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128;
}

// ---- context parallelism's ring attention (kernels/cuda/ring_attention.cu) -------------
// ops.h's, lse in float; layout.seq is Tq, `keys` Tk; head dims up to 256.
template <typename T>
void ring_attention_forward(T* out, float* lse, const T* qkv, const T* kv, const int32_t* q_index,
                            const int32_t* k_index, const int32_t* key_starts, const HeadLayout& layout,
                            int64_t keys, cudaStream_t stream);
template <typename T>
void ring_attention_backward(T* dqkv, T* dkv, const T* dout, const T* qkv, const T* kv, const T* out,
                             const float* lse, const int32_t* q_index, const int32_t* k_index,
                             const int32_t* key_starts, const HeadLayout& layout, int64_t keys,
                             cudaStream_t stream);
template <typename T>
void split_kv(T* kv, const T* qkv, const HeadLayout& layout, cudaStream_t stream);
template <typename T>
void add_kv_gradient(T* dqkv, const T* dkv, const HeadLayout& layout, cudaStream_t stream);

// ---- mixture of experts (kernels/cuda/moe_rows.cu) -------------------------------------
// ops.h's gather_rows, combine_rows and row_dots; weights null for all ones. k: row indices
// per output row.
template <typename T>
void gather_rows(T* out, const T* x, const int32_t* rows, const float* weights, int64_t M,
                 int64_t C, cudaStream_t stream);
template <typename T>
void combine_rows(T* out, const T* x, const int32_t* rows, const float* weights, int64_t N,
                  int64_t k, int64_t C, bool accumulate, cudaStream_t stream);
template <typename T>
void row_dots(float* out, const T* a, const T* b, const int32_t* rows, int64_t N, int64_t k,
              int64_t C, cudaStream_t stream);

// ---- mixture of experts: routing (kernels/cuda/expert_routing.cu) ----------------------
// ops.h's route_tokens, route_rows and route_backward over N tokens, for at most
// kMostRoutedExperts experts, through `scratch` (route_scratch_bytes() of device memory the
// caller owns: calls on one stream take turns with it); tally null when not wanted.
constexpr int kMostRoutedExperts = 512;
constexpr int kRouteBlocks = 64;
size_t route_scratch_bytes();
template <typename T>
void route_tokens(int32_t* choice, float* gate, float* stats, const T* logits, const float* bias, int64_t N,
                  const ExpertRoute& route, void* scratch, cudaStream_t stream);
void route_rows(int32_t* row, int32_t* source, float* row_gate, int32_t* offsets, float* counts,
                const int32_t* choice, const float* gate, int64_t N, const ExpertRoute& route, void* scratch,
                cudaStream_t stream);
template <typename T>
void route_backward(T* d_logits, float* tally, const float* d_gate, const T* logits, const int32_t* choice,
                    const float* stats, const float* shares, int64_t N, const ExpertRoute& route,
                    const RouteLoss& loss, cudaStream_t stream);

// ---- loss (kernels/cuda/cross_entropy.cu) -----------------------------------------------
template <typename T>
void cross_entropy_forward(float* losses, float* lse, const T* logits, const int32_t* targets,
                           int64_t N, int64_t Vp, int64_t V, cudaStream_t stream);
// dlogits may alias logits.
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const float* lse, const int32_t* targets,
                            int64_t N, int64_t Vp, int64_t V, float dloss, cudaStream_t stream);

// ---- optimizer (kernels/cuda/adamw.cu) --------------------------------------------------
// [begin, end) of the flat buffers is one parameter tensor; weight decay applies when decay.
struct AdamWSegment {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t decay = 0;  // 0 or 1; int64 so the host writes the table as int64 triples
};
// Every parameter in one launch (multi-tensor): float master weights, gradients and
// moments; segments (device memory) list the tensors; when param_copy is not null, the
// updated weights are also written to it in T; each gradient is multiplied by grad_scale as
// it is read. Elements outside every segment are left alone. With `scalars` (device memory,
// optimizer_scalars.h) the learning-rate terms and grad_scale are read from there instead of
// terms and grad_scale, and nothing changes when their skip is set.
template <typename T>
void adamw(float* master, const float* grad, float* m, float* v, T* param_copy,
           const AdamWSegment* segments, int n_segments, float beta1, float beta2, float eps,
           const AdamWTerms& terms, float grad_scale, const double* scalars, cudaStream_t stream);
// clip_rule on the scalars (device memory), in one thread.
void clip_factor(double* scalars, cudaStream_t stream);

}  // namespace kiln::cuda
