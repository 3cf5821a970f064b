#include "trainer/model/linear.h"

#include "base/check.h"

namespace kiln {

void Linear::bind(const LayerBuild& build, const std::string& name, int64_t in, int64_t out,
                  bool bias, double init_std, const TensorSplit& split) {
  // Backward produces the bias gradient before the weight's: it comes first.
  has_bias_ = bias;
  if (bias)
    bias_ = build.params.add(name + ".bias", {out}, Init::Zeros, 0, -1,
                             split.dim == 0 ? split : TensorSplit{});
  weight_ = build.params.add(name + ".weight", {out, in}, Init::Normal, init_std, -1, split);
  fp8_ = build.fp8;
  if (fp8_) fp8_layer_ = fp8_->add(build.micro_batch * build.seq(), in, out);
}

void Linear::forward(Ops& ops, const Tensor& y, const Tensor& x) const {
  if (has_bias_ && !fp8_) {
    ops.matmul_bias(as_matrix(y), as_matrix(x), weight_.value, bias_.value);
    return;
  }
  product(ops, y, x);
  add_bias(ops, y);
}

void Linear::forward_gelu(Ops& ops, const Tensor& y, const Tensor& pre, const Tensor& x) const {
  KILN_CHECK(has_bias_, "a linear layer followed by GELU has a bias");
  if (!fp8_) {
    ops.matmul_bias_gelu(as_matrix(y), as_matrix(pre), as_matrix(x), weight_.value, bias_.value);
    return;
  }
  product(ops, pre, x);
  add_bias(ops, pre);
  ops.gelu_forward(as_matrix(y), as_matrix(pre));
}

void Linear::product(Ops& ops, const Tensor& y, const Tensor& x) const {
  if (fp8_) fp8_->forward(ops, fp8_layer_, as_matrix(y), as_matrix(x), weight_.value);
  else ops.matmul(as_matrix(y), as_matrix(x), false, weight_.value, true, false);
}

void Linear::add_bias(Ops& ops, const Tensor& y) const {
  if (has_bias_) ops.add_bias(as_matrix(y), bias_.value);
}

void Linear::backward(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& x,
                      const Tensor& gelu_pre) const {
  if (fp8_) {
    if (has_bias_) ops.bias_backward(bias_.grad, as_matrix(dy));
    fp8_->backward(ops, fp8_layer_, dx.empty() ? dx : as_matrix(dx), as_matrix(dy), as_matrix(x), weight_.value, weight_.grad);
    if (!dx.empty() && !gelu_pre.empty()) ops.gelu_backward(as_matrix(dx), as_matrix(gelu_pre), as_matrix(dx));
    return;
  }
  if (!weight_.frozen) {  // a frozen base (LoRA) makes no gradients
    if (has_bias_) ops.matmul_bias_grad(weight_.grad, bias_.grad, as_matrix(dy), as_matrix(x));
    else ops.matmul(weight_.grad, as_matrix(dy), true, as_matrix(x), false, true);
  }
  if (dx.empty()) return;
  if (gelu_pre.empty()) ops.matmul(as_matrix(dx), as_matrix(dy), false, weight_.value, false, false);
  else ops.matmul_dgelu(as_matrix(dx), as_matrix(dy), weight_.value, as_matrix(gelu_pre));
}

}  // namespace kiln
