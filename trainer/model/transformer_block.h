// One pre-norm transformer block:
//   mid = x + attention(norm1(x));  out = mid + mlp(norm2(mid)).
// Backward turns the gradient of `out` into the gradient of `x` in the same buffer.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/mlp.h"
#include "trainer/model/norm.h"
#include "trainer/model/self_attention.h"

namespace kiln {

class TransformerBlock {
 public:
  void bind(const LayerBuild& build, int index, const Tensor& rope_table);
  void forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& x,
               const BlockScratch& scratch) const;
  // d_residual holds d(out) on entry and d(x) on return.
  void backward(Ops& ops, const Batch& batch, const Tensor& d_residual, const Tensor& x,
                const BlockScratch& scratch) const;

 private:
  Norm norm1_, norm2_;
  SelfAttention attention_;
  Mlp mlp_;
  std::vector<Tensor> norm1_out_, mid_, norm2_out_;  // per slot
};

}  // namespace kiln
