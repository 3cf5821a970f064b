// What the FP8 ops (kernels/ops.h) share: the layout of a cast tensor's scaling state and the
// checks CheckedOps (kernels/checked_ops.h) makes for every backend.
#pragma once

#include "kernels/fp8_convert.h"
#include "kernels/tensor.h"

namespace kiln {

// The F32 values of one FP8 tensor's `meta`.
enum Fp8Meta : int { kFp8Scale = 0, kFp8ScaleInv = 1, kFp8Amax = 2, kFp8MetaSize = 3 };

bool is_fp8(DType dtype);
// The format of E4M3 or E5M2 codes; refuses any other dtype, naming `op`.
Fp8Format fp8_format(DType dtype, const char* op);

// Ops::fp8_cast_transpose's tensors: x [R, C]; codes [R, C] and codes_t [C, R] (either empty,
// not both) of one FP8 dtype; meta F32 [kFp8MetaSize].
void check_fp8_cast(const Tensor& codes, const Tensor& codes_t, const Tensor& meta, const Tensor& x);
// The format of a cast's codes: codes', or codes_t's where codes is empty.
Fp8Format cast_format(const Tensor& codes, const Tensor& codes_t);
// Ops::fp8_matmul's: a [M, K], b [N, K] FP8, not both E5M2, metas F32 [kFp8MetaSize], out [M, N].
void check_fp8_matmul(const Tensor& out, const Tensor& a, const Tensor& a_meta, const Tensor& b,
                      const Tensor& b_meta);
void check_fp8_meta(const Tensor& meta, const char* op);

}  // namespace kiln
