#include "trainer/model/linear.h"

namespace kiln {

namespace {
// Views a [b, t, w] activation as the [b * t, w] matrix the product sees.
Tensor matrix(const Tensor& t) { return t.view({t.shape.rows(), t.shape.cols()}); }
}  // namespace

void Linear::bind(const LayerBuild& build, const std::string& name, int64_t in, int64_t out,
                  bool bias, double init_std, const TensorSplit& split) {
  // Backward produces the bias gradient before the weight's: it comes first.
  has_bias_ = bias;
  if (bias)
    bias_ = build.params.add(name + ".bias", {out}, Init::Zeros, 0, -1,
                             split.dim == 0 ? split : TensorSplit{});
  weight_ = build.params.add(name + ".weight", {out, in}, Init::Normal, init_std, -1, split);
}

void Linear::forward(Ops& ops, const Tensor& y, const Tensor& x) const {
  ops.matmul(matrix(y), matrix(x), false, weight_.value, true, false);
  if (has_bias_) ops.add_bias(matrix(y), bias_.value);
}

void Linear::backward(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& x) const {
  if (has_bias_) ops.bias_backward(bias_.grad, matrix(dy));
  ops.matmul(weight_.grad, matrix(dy), true, matrix(x), false, true);
  if (!dx.empty()) ops.matmul(matrix(dx), matrix(dy), false, weight_.value, false, false);
}

}  // namespace kiln
