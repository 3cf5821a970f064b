#include "cli/run_figures.h"

#include <cmath>

namespace kiln {

bool is_live(store::RunStatus status) {
  return status == store::RunStatus::Running || status == store::RunStatus::Paused;
}

double run_duration_s(const store::RunRecord& run, double now_s) {
  if (!run.started_at) return store::kNoValue;
  if (run.ended_at) return *run.ended_at - *run.started_at;
  if (run.status == store::RunStatus::Lost)
    return run.heartbeat_at.value_or(*run.started_at) - *run.started_at;
  return now_s - *run.started_at;
}

double mean_over_ranks(const std::vector<store::MetricRow>& rows, double store::MetricRow::*field) {
  double sum = 0;
  int count = 0;
  for (const auto& row : rows) {
    if (std::isnan(row.*field)) continue;
    sum += row.*field;
    ++count;
  }
  return count > 0 ? sum / count : store::kNoValue;
}

}  // namespace kiln
