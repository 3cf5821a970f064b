#include "trainer/optim/adamw.h"

#include <cmath>

namespace kiln {

AdamW::AdamW(const TrainConfig& train, const ParameterSet& params, Ops& ops)
    : train_(train), params_(params), ops_(ops) {
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) state_.allocate(ops_);
    m_.clear();
    v_.clear();
    for (const Parameter& p : params_.all()) {
      m_.push_back(state_.take(p.value.shape, p.value.dtype));
      v_.push_back(state_.take(p.value.shape, p.value.dtype));
    }
  }
  state_.check_complete();
}

double AdamW::grad_norm() const { return std::sqrt(ops_.sum_squares(params_.flat_grads())); }

double AdamW::step(double lr) {
  const double norm = grad_norm();
  // PyTorch's clip_grad_norm_ rule, epsilon included, so the two clip identically.
  const double clip = train_.clip_grad / (norm + 1e-6);
  if (train_.clip_grad > 0 && clip < 1.0) ops_.scale(params_.flat_grads(), clip);
  ++step_;
  const auto& all = params_.all();
  for (size_t i = 0; i < all.size(); ++i) {
    const Parameter& p = all[i];
    AdamWStep s{lr, train_.beta1, train_.beta2, train_.adam_eps,
                p.decay ? train_.weight_decay : 0.0, step_};
    ops_.adamw(p.value, p.grad, m_[i], v_[i], s);
  }
  return norm;
}

}  // namespace kiln
