// How often to checkpoint (kiln plan --mtbf-hours, docs/resilience.md#how-often-to-checkpoint):
// Young's rule as Daly refined it. A checkpoint costs the training `checkpoint_s` each time; a
// failure, which comes every `mtbf_s` on average, costs the work since the last checkpoint,
// half an interval on average. The interval that loses least between the two is
// sqrt(2 x checkpoint_s x mtbf_s) - checkpoint_s (Daly's first order).
#pragma once

#include <cstdint>

namespace kiln {

struct CheckpointInterval {
  int64_t steps = 0;             // the interval in steps, at least 1
  double interval_s = 0;         // those steps' seconds
  double checkpoint_share = 0;   // of the wall clock, spent writing checkpoints
  double lost_share = 0;         // lost to failures: the work since the last checkpoint
  double goodput = 0;            // what is left: 1 - the two (restarts' start-up not counted)
};

// For a step of step_s seconds; every argument a positive number, else a kiln::Error naming it.
CheckpointInterval checkpoint_interval(double checkpoint_s, double mtbf_s, double step_s);

}  // namespace kiln
