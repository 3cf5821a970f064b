// The CPU bodies of the op table, on raw pointers and explicit sizes, templated on the
// scalar type: float is the CPU backend, double serves the gradient checks. Each body
// is the reference the CUDA kernels are tested against. Threads come from OpenMP;
// every reduction runs in an order fixed by the sizes alone, so results do not depend
// on the number of threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/counter_random.h"
#include "kernels/dropout_mask.h"
#include "kernels/expert_route.h"
#include "kernels/head_columns.h"
#include "kernels/tensor.h"
#include "kernels/optimizer_scalars.h"

namespace kiln::cpu {

// C[M, N] = op(A) op(B) + beta * C, row-major, through BLAS.
template <typename T>
void gemm(bool transpose_a, bool transpose_b, int64_t M, int64_t N, int64_t K, T alpha,
          const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

template <typename T> void fill(T* x, int64_t n, T value);
// Ops::fill_normal on x's memory of the given floating dtype (kernels/cpu/fill_normal.cpp).
void fill_normal(void* x, DType dtype, const RandomRuns& runs, uint64_t seed, uint64_t stream,
                 double mean, double std);
template <typename T> void add(T* out, const T* a, const T* b, int64_t n);
template <typename T> void scale(T* x, int64_t n, T factor);
template <typename T> double sum_squares(const T* x, int64_t n);
template <typename T> void add_bias(T* out, const T* bias, int64_t N, int64_t C);
// Columns [first, first + c) of out[N, C] += factor * x[N, c]; out[N, c] = factor * those of x.
template <typename T> void add_columns(T* out, const T* x, int64_t N, int64_t C, int64_t c, int64_t first, T factor);
template <typename T> void take_columns(T* out, const T* x, int64_t N, int64_t C, int64_t c, int64_t first, T factor);
// Ops::copy_head_columns over rows of out_cols and x_cols values.
template <typename T>
void copy_head_columns(T* out, const T* x, int64_t N, int64_t out_cols, int64_t x_cols, const HeadColumns& columns);
template <typename T> void bias_backward(T* dbias, const T* dout, int64_t N, int64_t C);
// Ops::dropout on out[N, C] and x[N, C] (kernels/cpu/dropout.cpp).
template <typename T> void dropout(T* out, const T* x, int64_t N, int64_t C, const DropoutMask& mask, bool accumulate);

// The position of token n = b * seq + t: positions[n] (Ops' optional per-token positions),
// or t when there are none.
inline int64_t position_of(const int32_t* positions, int64_t n, int64_t seq) {
  return positions ? positions[n] : n % seq;
}

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const int32_t* positions, const T* wte,
                       const T* wpe, int64_t B, int64_t seq, int64_t C, int64_t vocab_rows);
template <typename T>
void embedding_backward(T* dwte, T* dwpe, const int32_t* tokens, const int32_t* positions,
                        const T* dout, int64_t B, int64_t seq, int64_t C, int64_t vocab_rows);

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                       int64_t N, int64_t C, double eps);
template <typename T>
void layernorm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x,
                        const T* weight, const T* mean, const T* rstd, int64_t N, int64_t C);
template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                     double eps);
template <typename T>
void rmsnorm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight,
                      const T* rstd, int64_t N, int64_t C);

template <typename T> void gelu_forward(T* out, const T* x, int64_t n);
template <typename T> void gelu_backward(T* dx, const T* x, const T* dout, int64_t n);
template <typename T> void swiglu_forward(T* out, const T* x, int64_t N, int64_t F);
template <typename T> void swiglu_backward(T* dx, const T* x, const T* dout, int64_t N, int64_t F);

// Mixture of experts (moe_rows.cpp): ops.h's gather_rows, combine_rows and row_dots, with
// weights null for all ones. k: row indices per output row.
template <typename T>
void gather_rows(T* out, const T* x, const int32_t* rows, const T* weights, int64_t M, int64_t C);
template <typename T>
void combine_rows(T* out, const T* x, const int32_t* rows, const T* weights, int64_t N,
                  int64_t k, int64_t C, bool accumulate);
template <typename T>
void row_dots(T* out, const T* a, const T* b, const int32_t* rows, int64_t N, int64_t k, int64_t C);

// The router (expert_routing.cpp): ops.h's route_tokens, route_rows and route_backward over N
// tokens; tally null when not wanted.
template <typename T>
void route_tokens(int32_t* choice, T* gate, T* stats, const T* logits, const T* bias, int64_t N,
                  const ExpertRoute& route);
template <typename T>
void route_rows(int32_t* row, int32_t* source, T* row_gate, int32_t* offsets, T* counts, const int32_t* choice,
                const T* gate, int64_t N, const ExpertRoute& route);
template <typename T>
void route_backward(T* d_logits, T* tally, const T* d_gate, const T* logits, const int32_t* choice, const T* stats,
                    const T* shares, int64_t N, const ExpertRoute& route, const RouteLoss& loss);

struct HeadLayout {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // the trailing dims of a head RoPE turns (AttentionShape::rotated_dim)
  int64_t qkv_width() const { return (n_head + 2 * n_kv_head) * head_dim; }
};

// inverse = false rotates forward, true rotates back (the backward of the rotation).
// positions: null, or the table row of each token.
template <typename T>
void rope(T* qkv, const T* table, const int32_t* positions, const HeadLayout& layout,
          bool inverse);

// scratch holds attention_scratch_bytes(seq, head_dim) bytes per thread, 64-byte aligned.
// key_starts: null (causal), or the first key of each query's row it attends to.
size_t attention_scratch_bytes(int64_t seq, int64_t head_dim);
template <typename T>
void attention_forward(T* out, T* lse, const T* qkv, const int32_t* key_starts,
                       const HeadLayout& layout, T* scratch);
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                        const int32_t* key_starts, const HeadLayout& layout, T* scratch);

// Context parallelism's ring attention (ring_attention.cpp), ops.h's; layout.seq is Tq,
// `keys` Tk.
template <typename T>
void ring_attention_forward(T* out, T* lse, const T* qkv, const T* kv, const int32_t* q_index,
                            const int32_t* k_index, const int32_t* key_starts, const HeadLayout& layout,
                            int64_t keys);
template <typename T>
void ring_attention_backward(T* dqkv, T* dkv, const T* dout, const T* qkv, const T* kv, const T* out,
                             const T* lse, const int32_t* q_index, const int32_t* k_index,
                             const int32_t* key_starts, const HeadLayout& layout, int64_t keys);
template <typename T>
void split_kv(T* kv, const T* qkv, const HeadLayout& layout);
template <typename T>
void add_kv_gradient(T* dqkv, const T* dkv, const HeadLayout& layout);

// Ops::attention_decode (kernels/cpu/attention_decode.cpp): layout.seq is the number of new
// positions per sequence; the caches are [batch, capacity, n_kv_head * head_dim].
template <typename T>
void attention_decode(T* out, T* k_cache, T* v_cache, const T* qkv, const HeadLayout& layout,
                      int64_t capacity, int64_t pos);

template <typename T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets, int64_t N,
                           int64_t Vp, int64_t V);
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                            int64_t N, int64_t Vp, int64_t V, double dloss);

// decays: the segment takes terms.decay (else none).
template <typename T>
void adamw(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWTerms& terms, bool decays,
           double beta1, double beta2, double eps, double grad_scale);

}  // namespace kiln::cpu
