// Shape checks that every backend makes the same way before it launches an op, so a
// mismatch reads the same on the CPU and the GPU.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace kiln {

// a and b have one shape and one dtype.
void check_same_shape(const Tensor& a, const Tensor& b, const char* op);

// The values of an optional per-token argument (ops.h: positions, key_starts): null when
// it is empty, else checked to be a [batch, seq] I32 tensor.
const int32_t* per_token(const Tensor& values, int64_t batch, int64_t seq, const char* op,
                         const char* name);

// Ops::attention_decode's tensors agree with each other and the cache can take positions
// [pos, pos + qkv.shape[1]).
void check_attention_decode(const Tensor& out, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& qkv, int64_t pos, AttentionShape shape);

// Ops::gather_rows, combine_rows and row_dots (ops.h): matrices of one width and dtype, row
// indices I32 and weights (when given) in the expected dtype, one per index. `k` is the
// indices per output row (1 for gather_rows).
void check_row_moves(const Tensor& out, const Tensor& x, const Tensor& rows,
                     const Tensor& weights, DType weight_dtype, int64_t k, const char* op);

}  // namespace kiln
