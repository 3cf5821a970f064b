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
  keep_inputs(build);
}

void Linear::bind_shared(const LayerBuild& build, const Parameter& weight) {
  weight_ = weight;
  keep_inputs(build);
}

void Linear::keep_inputs(const LayerBuild& build) {
  kept_x_.clear();
  kept_dy_.clear();
  if (!build.weight_inputs || weight_.frozen) return;
  // Every token of the rank's sequence share: a column-parallel layer's input and a
  // row-parallel one's output gradient are gathered whole under sequence parallelism.
  const int64_t rows = build.micro_batch * build.seq(), out = weight_.value.shape[0], in = weight_.value.shape[1];
  for (int s = 0; s < build.slots; ++s) {
    kept_x_.push_back(build.weight_inputs->take({rows, in}, build.dtype));
    kept_dy_.push_back(build.weight_inputs->take({rows, out}, build.dtype));
  }
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
  if (!weight_.frozen) weight_gradients(ops, as_matrix(dy), as_matrix(x));  // a frozen base (LoRA) makes none
  input_gradient(ops, dx, dy, gelu_pre);
}

void Linear::weight_gradients(Ops& ops, const Tensor& dy, const Tensor& x) const {
  if (has_bias_) ops.matmul_bias_grad(weight_.grad, bias_.grad, dy, x);
  else ops.matmul(weight_.grad, dy, true, x, false, true);
}

void Linear::input_gradient(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& gelu_pre) const {
  if (dx.empty()) return;
  if (gelu_pre.empty()) ops.matmul(as_matrix(dx), as_matrix(dy), false, weight_.value, false, false);
  else ops.matmul_dgelu(as_matrix(dx), as_matrix(dy), weight_.value, as_matrix(gelu_pre));
}

void Linear::backward_input(Ops& ops, int slot, const Tensor& dx, const Tensor& dy, const Tensor& x,
                            const Tensor& gelu_pre) const {
  KILN_CHECK(!fp8_, "a split backward has no FP8 products yet: precision.dtype=fp8 runs 1f1b");
  if (!weight_.frozen) {
    KILN_CHECK(!kept_x_.empty(), "Linear::backward_input: bound without LayerBuild::weight_inputs");
    const Tensor x_rows = as_matrix(x), dy_rows = as_matrix(dy);
    const size_t s = static_cast<size_t>(slot);
    ops.cast(kept_x_[s].slice(0, x_rows.shape[0]), x_rows);
    ops.cast(kept_dy_[s].slice(0, dy_rows.shape[0]), dy_rows);
  }
  input_gradient(ops, dx, dy, gelu_pre);
}

void Linear::backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                      const Tensor& gelu_pre) const {
  if (batch.defer_weights) backward_input(ops, batch.slot, dx, dy, x, gelu_pre);
  else backward(ops, dx, dy, x, gelu_pre);
}

void Linear::backward_weights(Ops& ops, int slot, int64_t rows) const {
  if (weight_.frozen) return;
  const size_t s = static_cast<size_t>(slot);
  weight_gradients(ops, kept_dy_[s].slice(0, rows), kept_x_[s].slice(0, rows));
}

Tensor Linear::kept_output_gradient(int slot, int64_t rows) const {
  return kept_dy_[static_cast<size_t>(slot)].slice(0, rows);
}

}  // namespace kiln
