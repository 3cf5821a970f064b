#include "store/run_figures.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace kiln::store {

bool is_live(RunStatus status) { return status == RunStatus::Running || status == RunStatus::Paused; }

double run_duration_s(const RunRecord& run, double now_s) {
  if (!run.started_at) return kNoValue;
  if (run.ended_at) return *run.ended_at - *run.started_at;
  if (run.status == RunStatus::Lost) return run.heartbeat_at.value_or(*run.started_at) - *run.started_at;
  return now_s - *run.started_at;
}

double mean_over_ranks(const std::vector<MetricRow>& rows, double MetricRow::*field) {
  double sum = 0;
  int count = 0;
  for (const auto& row : rows) {
    if (std::isnan(row.*field)) continue;
    sum += row.*field;
    ++count;
  }
  return count > 0 ? sum / count : kNoValue;
}

std::optional<int64_t> planned_steps(const std::string& config_json) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return std::nullopt;
  const nlohmann::json steps = config.value("/train/steps"_json_pointer, nlohmann::json());
  if (!steps.is_number_integer()) return std::nullopt;
  return steps.get<int64_t>();
}

}  // namespace kiln::store
