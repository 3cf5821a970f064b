// The checks CheckedOps (kernels/checked_ops.h) makes before it forwards an op to a backend, so
// a mismatch reads the same on the CPU and the GPU.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/ops.h"

namespace kiln {

// a and b have one shape and one dtype.
void check_same_shape(const Tensor& a, const Tensor& b, const char* op);

// Each tensor is of `dtype`.
void expect_dtype(std::initializer_list<const Tensor*> tensors, DType dtype, const char* op);

// The tensors of a linear layer's fused product (ops.h: matmul_bias and the rest): x [N, in],
// weight [out, in] (or its gradient), y [N, out] (the output, or its gradient) and, for an op
// with a bias (bias not null), *bias [out] (or its gradient), which must be given. Which
// dtypes each takes is the backend's to check.
void check_linear(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor* bias,
                  const char* op);

// An optional per-token argument (ops.h: positions, key_starts) is empty or a [batch, seq] I32
// tensor.
void check_per_token(const Tensor& values, int64_t batch, int64_t seq, const char* op, const char* name);

// qkv [B, T, qkv_width] of `shape`'s heads, whose query heads share the key heads evenly.
void check_heads(const Tensor& qkv, AttentionShape shape);

// Ops::attention_decode's tensors agree with each other and the cache can take positions
// [pos, pos + qkv.shape[1]).
void check_attention_decode(const Tensor& out, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& qkv, int64_t pos, AttentionShape shape);

// Ops::ring_attention_forward/backward's block: kv [B, Tk, 2 * n_kv_head * head_dim] of
// qkv's dtype and batch, the indices I32 [Tq] and [Tk], key_starts empty or [B, Tq].
void check_ring_block(const Tensor& qkv, const Tensor& kv, const Tensor& q_index, const Tensor& k_index,
                      const Tensor& key_starts, AttentionShape shape, const char* op);
// kv holds the key and value heads of qkv's tokens: [B, T, 2 * n_kv_head * head_dim].
void check_kv_of(const Tensor& kv, const Tensor& qkv, AttentionShape shape, const char* op);

// Ops::route_tokens, route_rows and route_backward (ops.h): a rule that can choose (top_k of
// its experts; groups that split the experts evenly, groups_topk of them holding top_k and
// each giving top_k / groups_topk), the choices I32 [N, k] of logits [N, E] (given, or
// `tokens` rows), and each statistic of its dtype and size (named by ops.h).
void check_route(const ExpertRoute& route, const Tensor* logits, int64_t tokens, const Tensor& choice,
                 const char* op);
void check_route_values(const Tensor& values, int64_t count, DType stat, const char* op, const char* name);

// Ops::gather_rows, combine_rows and row_dots (ops.h): matrices of one width and dtype, row
// indices I32 and weights (when given) in the expected dtype, one per index. `k` is the
// indices per output row (1 for gather_rows).
void check_row_moves(const Tensor& out, const Tensor& x, const Tensor& rows,
                     const Tensor& weights, DType weight_dtype, int64_t k, const char* op);

// Ops::expert_matmul and expert_weight_grad (ops.h): `offsets` E + 1 row boundaries ascending
// from 0 to the rows of `grouped` (every operand grouped by rows has them), and the stacked
// weight [E * W, D] cut evenly into E. The widths and dtypes of each op are its own to check.
void check_expert_groups(const std::vector<int64_t>& offsets, const Tensor& grouped, const Tensor& stacked,
                         const char* op);

// Ops::fill_normal's x is a floating tensor and its runs lie inside it, neither overlapping
// nor drawing an index of the stream twice.
void check_random_runs(const Tensor& x, const RandomRuns& runs, const char* op);

// The optimizer's scalars (optimizer_scalars.h): an F64 tensor of kOptimizerScalars values.
void check_optimizer_scalars(const Tensor& scalars, const char* op);

// Ops::cross_entropy_forward/backward: I32 targets, one per row of logits, and vocab_size no
// more than its columns.
void check_loss_shapes(const Tensor& logits, const Tensor& targets, int64_t vocab_size);

}  // namespace kiln
