// One log interval of the training loop: the steps trained since the last progress line,
// their mean loss and expert exchange time, and the interval's seconds per step without the
// time it spent not training (validation, checkpoints, pauses, alerts), which is left out of
// its tokens/s as Megatron's timers leave it out. Whoever spends such time sets it aside here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/util/step_clock.h"

namespace kiln {

struct IntervalMeans {
  double loss = 0;
  double seconds_per_step = 0;
  double exchange_ms = 0;  // the expert group's all-to-all, per step
  std::vector<double> mtp_losses;  // multi-token prediction's, depth by depth
};

class LogInterval {
 public:
  // Starts an interval at `start`: the first, or one after a rewind abandoned the steps so far.
  void open(Clock::time_point start);
  void add_step(double loss, double exchange_ms, std::span<const double> mtp_losses = {});
  // Time in this interval that was not training.
  void set_aside(double seconds) { aside_s_ += seconds; }
  // The means of the interval (at least one step) ending at `now`; the next starts there.
  IntervalMeans close(Clock::time_point now);

 private:
  Clock::time_point start_{};
  double loss_ = 0;
  double exchange_ms_ = 0;
  std::vector<double> mtp_losses_;
  double aside_s_ = 0;
  int64_t steps_ = 0;
};

}  // namespace kiln
