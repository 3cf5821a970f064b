// The experts' products of the op table (ops.h: expert_matmul, expert_weight_grad) as the one
// matmul per expert they stand for: the CPU backend's bodies, and what the GPU's grouped GEMM
// is held to. Experts without rows compute nothing. CheckedOps has checked their tensors
// (check_expert_products).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace kiln {

void expert_matmul_by_expert(Ops& ops, const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                             const std::vector<int64_t>& offsets);
void expert_weight_grad_by_expert(Ops& ops, const Tensor& dw, const Tensor& dy, const Tensor& x,
                                  const std::vector<int64_t>& offsets);

}  // namespace kiln
