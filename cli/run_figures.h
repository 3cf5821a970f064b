// Figures the history views derive from a run's record and rows.
#pragma once

#include <vector>

#include "store/types.h"

namespace kiln {

// Running or paused with a fresh heartbeat: a run that steering commands can reach.
bool is_live(store::RunStatus status);

// How long the run has run: to its end, to its last heartbeat if it was lost, to now if it
// is live. NaN for a run that never started.
double run_duration_s(const store::RunRecord& run, double now_s);

// The mean of one metric over the ranks that measured it; NaN when none did (a pipeline
// stage without the loss logs none).
double mean_over_ranks(const std::vector<store::MetricRow>& rows, double store::MetricRow::*field);

}  // namespace kiln
