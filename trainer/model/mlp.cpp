#include "trainer/model/mlp.h"

#include <cmath>

#include "trainer/config/lora_targets.h"

namespace kiln {

void Mlp::bind(const LayerBuild& build, const std::string& name) {
  const ModelConfig& m = build.model;
  swiglu_ = m.is_llama();
  const bool bias = !m.is_llama();
  const int64_t F = m.ffn_dim();
  const int64_t local_F = F / build.split.tp();  // this rank's hidden units
  const int64_t fc_width = swiglu_ ? 2 * local_F : local_F;
  proj_.bind(build, name + ".proj", F, m.d_model, bias, m.init_std / std::sqrt(2.0 * m.n_layer),
             adapter_name(m, LoraTarget::Down));
  fc_.bind(build, name + ".fc", m.d_model, swiglu_ ? std::vector<int64_t>{F, F} : std::vector<int64_t>{F},
           bias, m.init_std,
           swiglu_ ? std::vector<std::string>{adapter_name(m, LoraTarget::Gate), adapter_name(m, LoraTarget::Up)}
                   : std::vector<std::string>{adapter_name(m, LoraTarget::Fc)});
  fc_out_.clear();
  hidden_.clear();
  for (int s = 0; s < build.slots; ++s) {
    fc_out_.push_back(build.take(build.activations, fc_width));
    hidden_.push_back(build.take(build.activations, local_F));
  }
}

void Mlp::forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor fc_out = batch.of(fc_out_[s]);
  const Tensor hidden = batch.of(hidden_[s]);
  if (swiglu_) {
    fc_.forward(ops, batch, fc_out, x);
    ops.swiglu_forward(hidden, fc_out);
  } else {
    fc_.forward_gelu(ops, batch, hidden, fc_out, x);
  }
  proj_.forward(ops, batch, y, hidden);
}

void Mlp::backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy,
                   const Tensor& x, const BlockScratch& scratch) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const Tensor fc_out = batch.of(fc_out_[s]);
  const Tensor hidden = batch.of(hidden_[s]);
  const Tensor d_fc = batch.of(scratch.d_fc);
  if (swiglu_) {
    const Tensor d_hidden = batch.of(scratch.d_hidden);
    proj_.backward(ops, batch, d_hidden, dy, hidden);
    ops.swiglu_backward(d_fc, fc_out, d_hidden);
  } else {
    // The GELU's backward is part of proj's input-gradient product: d_fc directly.
    proj_.backward(ops, batch, d_fc, dy, hidden, fc_out);
  }
  fc_.backward(ops, batch, dx, d_fc, x);
}

void Mlp::backward_weights(Ops& ops, const Batch& batch) const {
  proj_.backward_weights(ops, batch);
  fc_.backward_weights(ops, batch);
}

}  // namespace kiln
