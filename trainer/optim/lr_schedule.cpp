#include "trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace kiln {

double learning_rate(const TrainConfig& train, int64_t step) {
  if (train.warmup > 0 && step <= train.warmup)
    return train.lr * static_cast<double>(step) / static_cast<double>(train.warmup);
  const double decay_steps = static_cast<double>(std::max<int64_t>(1, train.steps - train.warmup));
  const double progress =
      std::clamp(static_cast<double>(step - train.warmup) / decay_steps, 0.0, 1.0);
  const double span = train.lr - train.min_lr;
  if (train.decay == "cosine") return train.min_lr + 0.5 * span * (1.0 + std::cos(M_PI * progress));
  if (train.decay == "linear") return train.lr - span * progress;
  if (train.decay == "wsd") {
    const double stable = 1.0 - train.wsd_decay_fraction;
    if (progress <= stable) return train.lr;
    return train.lr - span * (progress - stable) / train.wsd_decay_fraction;
  }
  return train.lr;
}

}  // namespace kiln
