// y[N, out] = x[N, in] W^T (+ b), W stored [out, in] as in PyTorch.
//
// The bias goes into the product and its gradient into the weight gradient's product
// (ops.h's fused products: cuBLASLt's epilogues on a GPU, the same separate ops as before
// on the CPU); a GELU after the layer goes into the forward product too, and its backward
// into the next layer's input-gradient product. Under precision.dtype=fp8 the products are
// FP8's (trainer/precision/fp8_products.h) and the bias and GELU separate ops around them.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/layer_build.h"
#include "trainer/precision/fp8_products.h"

namespace kiln {

class Linear {
 public:
  // in, out: this rank's extents; split: how its weight (and a bias split by rows with it)
  // is cut from the whole layer's (tensor_parallel_linear.h); a bias of a weight split by
  // columns is whole on every rank.
  void bind(const LayerBuild& build, const std::string& name, int64_t in, int64_t out, bool bias,
            double init_std, const TensorSplit& split = {});
  // Shares an existing weight (tied embeddings): no parameter of its own.
  void bind_shared(const LayerBuild& build, const Parameter& weight);

  void forward(Ops& ops, const Tensor& y, const Tensor& x) const;
  // pre = x W^T + b, y = gelu(pre): GPT-2's first MLP layer, which has a bias.
  void forward_gelu(Ops& ops, const Tensor& y, const Tensor& pre, const Tensor& x) const;
  // y = x W^T without the bias, and the bias alone: a row-parallel layer sums its ranks'
  // products before it adds the bias, once.
  void product(Ops& ops, const Tensor& y, const Tensor& x) const;
  void add_bias(Ops& ops, const Tensor& y) const;
  // dx = dy W (overwrites; skipped when dx is empty), dW += dy^T x, db += sum(dy) (none of
  // them when the weight is frozen). With
  // gelu_pre given, x was gelu(gelu_pre) and dx is the gradient of gelu_pre instead:
  // gelu'(gelu_pre) * (dy W).
  void backward(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& x,
                const Tensor& gelu_pre = {}) const;
  // The backward in two (the zero-bubble schedules): dx now, as backward computes it, with x
  // and dy copied into the slot's copies (bound with LayerBuild::weight_inputs); then dW and
  // db from those copies, the slot's `rows` rows of them.
  void backward_input(Ops& ops, int slot, const Tensor& dx, const Tensor& dy, const Tensor& x,
                      const Tensor& gelu_pre = {}) const;
  void backward_weights(Ops& ops, int slot, int64_t rows) const;
  // The leading rows of the slot's copy of dy: the gradient of a bias added apart from the
  // layer (a shared expert's, added once under tensor parallelism) comes from it.
  Tensor kept_output_gradient(int slot, int64_t rows) const;
  // backward whole, or backward_input into the batch's slot when the batch defers the weights'
  // gradients (a split backward's first pass).
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                const Tensor& gelu_pre = {}) const;

  const Parameter& weight() const { return weight_; }

 private:
  // Takes the slot copies of x and dy when the build splits backward.
  void keep_inputs(const LayerBuild& build);
  // dW += dy^T x, db += sum(dy).
  void weight_gradients(Ops& ops, const Tensor& dy, const Tensor& x) const;
  // dx = dy W, or with gelu_pre the gradient of gelu_pre.
  void input_gradient(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& gelu_pre) const;

  Parameter weight_;
  Parameter bias_;
  bool has_bias_ = false;
  // Its products in FP8 (precision.dtype=fp8), as layer fp8_layer_ of fp8_; null otherwise.
  Fp8Products* fp8_ = nullptr;
  int fp8_layer_ = -1;
  // Per slot, the copies of x [rows, in] and dy [rows, out] a split backward keeps.
  std::vector<Tensor> kept_x_, kept_dy_;
};

}  // namespace kiln
