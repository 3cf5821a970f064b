#include "trainer/model/norm.h"

#include "trainer/model/sequence_parallel.h"

namespace kiln {

void Norm::bind(const LayerBuild& build, const std::string& name) {
  rms_ = build.model.is_llama();
  latent_ = false;
  eps_ = build.model.norm_eps;
  const int64_t C = build.model.d_model;
  if (!rms_) bias_ = build.params.add(name + ".bias", {C}, Init::Zeros);
  weight_ = build.params.add(name + ".weight", {C}, Init::Ones);
  shared_over_ = build.sequence ? &build.sequence->group() : nullptr;
  take_buffers(build, C);
}

void Norm::bind_latent(const LayerBuild& build, const std::string& name, int64_t width, Communicator* group) {
  rms_ = true;
  latent_ = true;
  eps_ = build.model.norm_eps;
  weight_ = build.params.add(name + ".weight", {width}, Init::Ones);
  shared_over_ = group;
  take_buffers(build, width);
}

void Norm::take_buffers(const LayerBuild& build, int64_t width) {
  mean_.clear();
  rstd_.clear();
  kept_.clear();
  const auto rows_of = [&](Arena& arena, int64_t w) { return latent_ ? build.take(arena, w) : build.take_share(arena, w); };
  const auto stats_of = [&](Arena& arena) { return latent_ ? build.take_stats(arena) : build.take_share_stats(arena); };
  for (int s = 0; s < build.slots; ++s) {
    if (!rms_) mean_.push_back(stats_of(build.activations));
    rstd_.push_back(stats_of(build.activations));
    if (!build.weight_inputs || weight_.frozen) continue;
    Arena& kept = *build.weight_inputs;
    kept_.push_back({rows_of(kept, width), rows_of(kept, width), rms_ ? Tensor{} : stats_of(kept), stats_of(kept)});
  }
}

void Norm::forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& x) const {
  const Tensor rstd = rows(batch, rstd_[static_cast<size_t>(batch.slot)]);
  if (rms_) {
    ops.rmsnorm_forward(out, rstd, x, weight_.value, eps_);
  } else {
    const Tensor mean = rows(batch, mean_[static_cast<size_t>(batch.slot)]);
    ops.layernorm_forward(out, mean, rstd, x, weight_.value, bias_.value, eps_);
  }
}

void Norm::backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dout,
                    const Tensor& x) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor rstd = rows(batch, rstd_[s]), mean = rms_ ? Tensor{} : rows(batch, mean_[s]);
  if (!batch.defer_weights || weight_.frozen) return gradients(ops, dx, dout, x, mean, rstd);
  const Kept& k = kept_[s];
  ops.cast(rows(batch, k.x), x);
  ops.cast(rows(batch, k.dout), dout);
  ops.cast(rows(batch, k.rstd), rstd);
  if (!rms_) ops.cast(rows(batch, k.mean), mean);
  run_backward(ops, dx, {}, {}, dout, x, mean, rstd);
}

void Norm::backward_weights(Ops& ops, const Batch& batch) const {
  if (weight_.frozen) return;
  const Kept& k = kept_[static_cast<size_t>(batch.slot)];
  gradients(ops, {}, rows(batch, k.dout), rows(batch, k.x), rms_ ? Tensor{} : rows(batch, k.mean),
            rows(batch, k.rstd));
}

void Norm::run_backward(Ops& ops, const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& x, const Tensor& mean, const Tensor& rstd) const {
  if (rms_) ops.rmsnorm_backward(dx, dweight, dout, x, weight_.value, rstd);
  else ops.layernorm_backward(dx, dweight, dbias, dout, x, weight_.value, mean, rstd);
}

void Norm::gradients(Ops& ops, const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& mean,
                     const Tensor& rstd) const {
  ShareGradients(shared_over_).sum(ops, {&weight_, &bias_}, [&] {
    run_backward(ops, dx, weight_.grad, bias_.grad, dout, x, mean, rstd);
  });
}

}  // namespace kiln
