// Figures the history views derive from a run's record and rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/database.h"
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

// A run as the history tables (kiln runs list, kiln tui) show it: its record, its planned
// steps, and what its latest logged step measured, averaged over the ranks.
struct ListedRun {
  store::RunRecord run;
  std::optional<int64_t> planned_steps;
  double loss = store::kNoValue;
  double tokens_per_s = store::kNoValue;
  double mfu = store::kNoValue;
  double duration_s = store::kNoValue;
};
ListedRun describe_run(store::Database& db, store::RunRecord run, double now_s);
// The last logged step of the planned ones, "120/1000" ("120" without a plan, "-/1000"
// before the first log).
std::string steps_text(const ListedRun& listed);

}  // namespace kiln
