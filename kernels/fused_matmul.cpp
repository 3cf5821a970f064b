#include "kernels/fused_matmul.h"

namespace kiln {

void composed_matmul_bias(Ops& ops, const Tensor& out, const Tensor& x, const Tensor& weight,
                          const Tensor& bias) {
  ops.matmul(out, x, false, weight, true, false);
  ops.add_bias(out, bias);
}

void composed_matmul_bias_gelu(Ops& ops, const Tensor& out, const Tensor& pre, const Tensor& x,
                               const Tensor& weight, const Tensor& bias) {
  ops.matmul(pre, x, false, weight, true, false);
  ops.add_bias(pre, bias);
  ops.gelu_forward(out, pre);
}

void composed_matmul_bias_grad(Ops& ops, const Tensor& dweight, const Tensor& dbias,
                               const Tensor& dy, const Tensor& x) {
  ops.bias_backward(dbias, dy);
  ops.matmul(dweight, dy, true, x, false, true);
}

void composed_matmul_dgelu(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& weight,
                           const Tensor& pre) {
  ops.matmul(dx, dy, false, weight, false, false);
  ops.gelu_backward(dx, pre, dx);
}

}  // namespace kiln
