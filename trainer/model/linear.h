// y[N, out] = x[N, in] W^T (+ b), W stored [out, in] as in PyTorch.
#pragma once

#include <string>

#include "trainer/model/layer_build.h"

namespace kiln {

class Linear {
 public:
  // in, out: this rank's extents; split: how its weight (and a bias split by rows with it)
  // is cut from the whole layer's (tensor_parallel_linear.h).
  void bind(const LayerBuild& build, const std::string& name, int64_t in, int64_t out, bool bias,
            double init_std, const TensorSplit& split = {});
  // Shares an existing weight (tied embeddings): no parameter of its own.
  void bind_shared(const Parameter& weight) { weight_ = weight; }

  void forward(Ops& ops, const Tensor& y, const Tensor& x) const;
  // dx = dy W (overwrites; skipped when dx is empty), dW += dy^T x, db += sum(dy).
  void backward(Ops& ops, const Tensor& dx, const Tensor& dy, const Tensor& x) const;

 private:
  Parameter weight_;
  Parameter bias_;
  bool has_bias_ = false;
};

}  // namespace kiln
