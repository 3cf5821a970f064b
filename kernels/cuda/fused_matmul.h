// The op table's fused products (ops.h: matmul_bias and the rest) as one cuBLASLt product
// each, its epilogue doing the bias, the GELU or the bias gradient. Each takes tensors
// CheckedOps has checked, launches on `stream` without synchronising, and returns false, having launched nothing,
// where cuBLASLt has no kernel for the call: the caller then runs the separate ops
// (kernels/fused_matmul.h).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/matmul.h"
#include "kernels/tensor.h"

namespace kiln::cuda {

bool fused_matmul_bias(Matmul& matmul, const Tensor& out, const Tensor& x, const Tensor& weight,
                       const Tensor& bias, cudaStream_t stream);
bool fused_matmul_bias_gelu(Matmul& matmul, const Tensor& out, const Tensor& pre, const Tensor& x,
                            const Tensor& weight, const Tensor& bias, cudaStream_t stream);
// The bias gradient comes out of the product whole (cuBLASLt writes it, never adds to it):
// into Matmul's buffer, then added to dbias, one small kernel.
bool fused_matmul_bias_grad(Matmul& matmul, const Tensor& dweight, const Tensor& dbias,
                            const Tensor& dy, const Tensor& x, cudaStream_t stream);
bool fused_matmul_dgelu(Matmul& matmul, const Tensor& dx, const Tensor& dy, const Tensor& weight,
                        const Tensor& pre, cudaStream_t stream);

}  // namespace kiln::cuda
