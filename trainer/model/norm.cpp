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
  kept_.clear();
  for (int s = 0; s < build.slots; ++s) {
    if (!rms_) mean_.push_back(build.take_share_stats(build.activations));
    rstd_.push_back(build.take_share_stats(build.activations));
    if (!build.weight_inputs || weight_.frozen) continue;
    Arena& kept = *build.weight_inputs;
    kept_.push_back({build.take_share(kept, C), build.take_share(kept, C),
                     rms_ ? Tensor{} : build.take_share_stats(kept), build.take_share_stats(kept)});
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
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor rstd = batch.share_of(rstd_[s]), mean = rms_ ? Tensor{} : batch.share_of(mean_[s]);
  if (!batch.defer_weights || weight_.frozen) return gradients(ops, dx, dout, x, mean, rstd);
  const Kept& k = kept_[s];
  ops.cast(batch.share_of(k.x), x);
  ops.cast(batch.share_of(k.dout), dout);
  ops.cast(batch.share_of(k.rstd), rstd);
  if (!rms_) ops.cast(batch.share_of(k.mean), mean);
  run_backward(ops, dx, {}, {}, dout, x, mean, rstd);
}

void Norm::backward_weights(Ops& ops, const Batch& batch) const {
  if (weight_.frozen) return;
  const Kept& k = kept_[static_cast<size_t>(batch.slot)];
  gradients(ops, {}, batch.share_of(k.dout), batch.share_of(k.x), rms_ ? Tensor{} : batch.share_of(k.mean),
            batch.share_of(k.rstd));
}

void Norm::run_backward(Ops& ops, const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& x, const Tensor& mean, const Tensor& rstd) const {
  if (rms_) ops.rmsnorm_backward(dx, dweight, dout, x, weight_.value, rstd);
  else ops.layernorm_backward(dx, dweight, dbias, dout, x, weight_.value, mean, rstd);
}

void Norm::gradients(Ops& ops, const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& mean,
                     const Tensor& rstd) const {
  const ShareGradients shared(sequence_);
  shared.begin(ops, weight_);
  shared.begin(ops, bias_);
  run_backward(ops, dx, weight_.grad, bias_.grad, dout, x, mean, rstd);
  shared.end(weight_);
  shared.end(bias_);
}

}  // namespace kiln
