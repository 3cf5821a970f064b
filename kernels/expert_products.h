// The experts' products of the op table (ops.h: expert_matmul, expert_weight_grad) as the one
// matmul per expert they stand for: the CPU backend's bodies, and what the GPU's grouped GEMM
// is held to. Experts without rows compute nothing. CheckedOps has checked their tensors
// (check_expert_products).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace kiln {

// Calls f(e, begin, end) for each expert e with rows [begin, end) at expert-major offsets
// (E + 1 of them), skipping experts without rows.
template <typename F>
void for_each_expert(const std::vector<int64_t>& offsets, F f) {
  for (size_t e = 0; e + 1 < offsets.size(); ++e)
    if (offsets[e] < offsets[e + 1]) f(static_cast<int64_t>(e), offsets[e], offsets[e + 1]);
}

// Expert e's part of a stacked [E * width, ...] weight or bias: its rows [e * width, (e + 1) * width).
inline Tensor expert_rows(const Tensor& stacked, int64_t e, int64_t width) {
  return stacked.slice(e * width, (e + 1) * width);
}

void expert_matmul_by_expert(Ops& ops, const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                             const std::vector<int64_t>& offsets);
void expert_weight_grad_by_expert(Ops& ops, const Tensor& dw, const Tensor& dy, const Tensor& x,
                                  const std::vector<int64_t>& offsets);

}  // namespace kiln
