// The fused products of the op table (ops.h: matmul_bias and the rest) as the unfused ops
// they stand for, called in the order the op table names them: the CPU backend's bodies, so
// its results are those of the separate ops bit for bit, and the CUDA backend's wherever
// cuBLASLt has no fused kernel for a call. CheckedOps has checked their tensors.
#pragma once

#include "kernels/ops.h"

namespace kiln {

void composed_matmul_bias(Ops& ops, const Tensor& out, const Tensor& x, const Tensor& weight,
                          const Tensor& bias);
void composed_matmul_bias_gelu(Ops& ops, const Tensor& out, const Tensor& pre, const Tensor& x,
                               const Tensor& weight, const Tensor& bias);
void composed_matmul_bias_grad(Ops& ops, const Tensor& dweight, const Tensor& dbias,
                               const Tensor& dy, const Tensor& x);
void composed_matmul_dgelu(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& weight,
                           const Tensor& pre);

}  // namespace kiln
