// The run screen's plan line: the step time and memory the planner gave the run's layout on
// its device (kiln plan, recorded when the run started) beside what the run measures, "planned
// 12.3 ms/step · measured 14.8 ms/step · planned memory 63.1 MiB · measured 70.2 MiB"; the
// measured step is marked when the run is more than 20% slower than planned over its recent
// steps, not at one slow step (store::persisting_step_s).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "monitor/tui/theme.h"
#include "store/types.h"

namespace kiln::tui {

struct PlanLine {
  std::string planned_step;   // "planned 12.3 ms/step"
  std::string measured_step;  // "measured 14.8 ms/step", "measured - ms/step" before a log
  bool slower = false;        // the recent steps' median more than 20% over planned
  std::string memory;         // "planned memory 63.1 MiB · measured 70.2 MiB"
  std::string text() const;   // the whole line, as drawn
};

// Nothing for a run without a plan (recorded before kiln plan, or on a GPU it does not know).
// `latest`: each rank's latest metric row; the measured figures are rank 0's. `rates`: rank
// 0's tokens/s at its logged steps, oldest first (the run screen's throughput curve); fewer
// than store::kPersistentSteps of them are never marked.
std::optional<PlanLine> plan_line(const store::RunRecord& run, const std::vector<store::MetricRow>& latest,
                                  const std::vector<double>& rates);

// Draws the line on `row` from column 1, `width` columns; a run without a plan leaves it blank.
void draw_plan_line(int row, int width, const store::RunRecord& run, const std::vector<store::MetricRow>& latest,
                    const std::vector<double>& rates, const Theme& theme);

}  // namespace kiln::tui
