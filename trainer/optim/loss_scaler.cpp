#include "trainer/optim/loss_scaler.h"

#include <algorithm>

namespace kiln {

LossScaler LossScaler::dynamic(double initial, int64_t growth_interval) {
  return LossScaler(initial, growth_interval);
}

void LossScaler::update(bool overflow) {
  if (overflow) {
    ++skipped_;
    clean_steps_ = 0;
    if (growth_interval_ > 0) scale_ = std::max(1.0, scale_ / 2);
    return;
  }
  if (growth_interval_ > 0 && ++clean_steps_ >= growth_interval_) {
    scale_ *= 2;
    clean_steps_ = 0;
  }
}

}  // namespace kiln
