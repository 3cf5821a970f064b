#include "kernels/expert_products.h"

namespace kiln {

void expert_matmul_by_expert(Ops& ops, const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                             const std::vector<int64_t>& offsets) {
  const int64_t width = w.shape.rows() / static_cast<int64_t>(offsets.size() - 1);
  for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t end) {
    ops.matmul(out.slice(begin, end), x.slice(begin, end), false, expert_rows(w, e, width), transpose_w, false);
  });
}

void expert_weight_grad_by_expert(Ops& ops, const Tensor& dw, const Tensor& dy, const Tensor& x,
                                  const std::vector<int64_t>& offsets) {
  const int64_t width = dw.shape.rows() / static_cast<int64_t>(offsets.size() - 1);
  for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t end) {
    ops.matmul(expert_rows(dw, e, width), dy.slice(begin, end), true, x.slice(begin, end), false, true);
  });
}

}  // namespace kiln
