#include "kernels/expert_products.h"

namespace kiln {
namespace {

// Expert e's rows of the stacked weight w [E * W, D].
Tensor expert_part(const Tensor& w, size_t experts, size_t e) {
  const int64_t W = w.shape.rows() / static_cast<int64_t>(experts);
  return w.slice(static_cast<int64_t>(e) * W, static_cast<int64_t>(e + 1) * W);
}

}  // namespace

void expert_matmul_by_expert(Ops& ops, const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                             const std::vector<int64_t>& offsets) {
  const size_t experts = offsets.size() - 1;
  for (size_t e = 0; e < experts; ++e)
    if (offsets[e] < offsets[e + 1])
      ops.matmul(out.slice(offsets[e], offsets[e + 1]), x.slice(offsets[e], offsets[e + 1]), false,
                 expert_part(w, experts, e), transpose_w, false);
}

void expert_weight_grad_by_expert(Ops& ops, const Tensor& dw, const Tensor& dy, const Tensor& x,
                                  const std::vector<int64_t>& offsets) {
  const size_t experts = offsets.size() - 1;
  for (size_t e = 0; e < experts; ++e)
    if (offsets[e] < offsets[e + 1])
      ops.matmul(expert_part(dw, experts, e), dy.slice(offsets[e], offsets[e + 1]), true,
                 x.slice(offsets[e], offsets[e + 1]), false, true);
}

}  // namespace kiln
