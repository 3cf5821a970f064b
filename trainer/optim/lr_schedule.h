// The learning rate of each step: linear warmup from 0 to train.lr over train.warmup
// steps, then decay to train.min_lr by train.decay: cosine, linear, wsd (hold, then a
// linear decay over the last wsd_decay_fraction of the steps), or constant.
#pragma once

#include <cstdint>

#include "trainer/config/config.h"

namespace kiln {

// step counts from 1.
double learning_rate(const TrainConfig& train, int64_t step);

}  // namespace kiln
