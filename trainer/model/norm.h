// The pre-norm of a block: LayerNorm (GPT-2) or RMSNorm (Llama), chosen by model.arch.
// It saves its statistics per activation slot for backward.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/layer_build.h"

namespace kiln {

class Norm {
 public:
  void bind(const LayerBuild& build, const std::string& name);
  void forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& x) const;
  // dx += the input gradient; weight (and bias) gradients accumulate.
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dout,
                const Tensor& x) const;

 private:
  bool rms_ = false;
  double eps_ = 1e-5;
  Parameter weight_;
  Parameter bias_;
  const SequenceParallel* sequence_ = nullptr;  // its weights see this rank's tokens only
  std::vector<Tensor> mean_;  // per slot, [micro_batch, seq_len] (LayerNorm only)
  std::vector<Tensor> rstd_;  // per slot
};

}  // namespace kiln
