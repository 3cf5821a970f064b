// Figures the history views (the CLI, the dashboard) derive from a run's record and rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/types.h"

namespace kiln::store {

// Running or paused with a fresh heartbeat: a run that steering commands can reach.
bool is_live(RunStatus status);

// How long the run has run: to its end, to its last heartbeat if it was lost, to now if it
// is live. NaN for a run that never started.
double run_duration_s(const RunRecord& run, double now_s);

// The mean of one metric over the ranks that measured it; NaN when none did (a pipeline
// stage without the loss logs none).
double mean_over_ranks(const std::vector<MetricRow>& rows, double MetricRow::*field);

// train.steps of a recorded config, if it has one. Read leniently: a run's record must stay
// readable whatever kiln version wrote it, so text that is not JSON gives nothing.
std::optional<int64_t> planned_steps(const std::string& config_json);

}  // namespace kiln::store
