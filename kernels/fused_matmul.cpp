#include "kernels/fused_matmul.h"

#include "kernels/op_checks.h"

namespace kiln {

void composed_matmul_bias(Ops& ops, const Tensor& out, const Tensor& x, const Tensor& weight,
                          const Tensor& bias) {
  check_linear(out, x, weight, &bias, "matmul_bias");
  ops.matmul(out, x, false, weight, true, false);
  ops.add_bias(out, bias);
}

void composed_matmul_bias_gelu(Ops& ops, const Tensor& out, const Tensor& pre, const Tensor& x,
                               const Tensor& weight, const Tensor& bias) {
  check_linear(out, x, weight, &bias, "matmul_bias_gelu");
  check_same_shape(pre, out, "matmul_bias_gelu");
  ops.matmul(pre, x, false, weight, true, false);
  ops.add_bias(pre, bias);
  ops.gelu_forward(out, pre);
}

void composed_matmul_bias_grad(Ops& ops, const Tensor& dweight, const Tensor& dbias,
                               const Tensor& dy, const Tensor& x) {
  check_linear(dy, x, dweight, &dbias, "matmul_bias_grad");
  ops.bias_backward(dbias, dy);
  ops.matmul(dweight, dy, true, x, false, true);
}

void composed_matmul_dgelu(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& weight,
                           const Tensor& pre) {
  check_linear(dy, dx, weight, nullptr, "matmul_dgelu");
  check_same_shape(pre, dx, "matmul_dgelu");
  ops.matmul(dx, dy, false, weight, false, false);
  ops.gelu_backward(dx, pre, dx);
}

}  // namespace kiln
