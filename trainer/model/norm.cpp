#include "trainer/model/norm.h"

#include "trainer/model/sequence_parallel.h"

namespace kiln {

void Norm::bind(const LayerBuild& build, const std::string& name) {
  rms_ = build.model.is_llama();
  eps_ = build.model.norm_eps;
  const int64_t C = build.model.d_model;
  if (!rms_) bias_ = build.params.add(name + ".bias", {C}, Init::Zeros);
  weight_ = build.params.add(name + ".weight", {C}, Init::Ones);
  mean_.clear();
  rstd_.clear();
  for (int s = 0; s < build.slots; ++s) {
    if (!rms_) mean_.push_back(build.take_share_stats(build.activations));
    rstd_.push_back(build.take_share_stats(build.activations));
  }
  sequence_ = build.sequence;
}

void Norm::forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& x) const {
  const Tensor rstd = batch.share_of(rstd_[static_cast<size_t>(batch.slot)]);
  if (rms_) {
    ops.rmsnorm_forward(out, rstd, x, weight_.value, eps_);
  } else {
    const Tensor mean = batch.share_of(mean_[static_cast<size_t>(batch.slot)]);
    ops.layernorm_forward(out, mean, rstd, x, weight_.value, bias_.value, eps_);
  }
}

void Norm::backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dout,
                    const Tensor& x) const {
  const Tensor rstd = batch.share_of(rstd_[static_cast<size_t>(batch.slot)]);
  const ShareGradients shared(sequence_);
  shared.begin(ops, weight_);
  shared.begin(ops, bias_);
  if (rms_) {
    ops.rmsnorm_backward(dx, weight_.grad, dout, x, weight_.value, rstd);
  } else {
    const Tensor mean = batch.share_of(mean_[static_cast<size_t>(batch.slot)]);
    ops.layernorm_backward(dx, weight_.grad, bias_.grad, dout, x, weight_.value, mean, rstd);
  }
  shared.end(weight_);
  shared.end(bias_);
}

}  // namespace kiln
