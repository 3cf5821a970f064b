#include "store/run_figures.h"

#include <algorithm>
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

std::optional<double> goodput(const RunRecord& run, double now_s) {
  if (!run.step_seconds || !run.attempt_started_at) return std::nullopt;
  double end = now_s;
  if (run.ended_at) end = *run.ended_at;
  else if (run.status == RunStatus::Lost) end = run.heartbeat_at.value_or(*run.attempt_started_at);
  const double counted = run.counted_seconds + std::max(0.0, end - *run.attempt_started_at);
  if (!(counted > 0)) return std::nullopt;
  return *run.step_seconds / counted;
}

double measured_step_s(const std::vector<MetricRow>& latest) {
  if (latest.empty()) return kNoValue;
  const auto zero = std::find_if(latest.begin(), latest.end(), [](const MetricRow& r) { return r.rank == 0; });
  const MetricRow& row = zero != latest.end() ? *zero : latest.front();
  if (row.step <= 0 || row.tokens <= 0 || !(row.tokens_per_s > 0) || !std::isfinite(row.tokens_per_s))
    return kNoValue;
  return static_cast<double>(row.tokens) / static_cast<double>(row.step) / row.tokens_per_s;
}

double persisting_step_s(const std::vector<MetricRow>& latest, const std::vector<double>& rates) {
  const auto zero = std::find_if(latest.begin(), latest.end(), [](const MetricRow& r) { return r.rank == 0; });
  if (zero == latest.end() || zero->step <= 0 || zero->tokens <= 0 || rates.size() < kPersistentSteps)
    return kNoValue;
  const double tokens_per_step = static_cast<double>(zero->tokens) / static_cast<double>(zero->step);
  std::vector<double> steps;
  for (auto rate = rates.end() - kPersistentSteps; rate != rates.end(); ++rate) {
    if (!(*rate > 0) || !std::isfinite(*rate)) return kNoValue;  // a step that measured nothing
    steps.push_back(tokens_per_step / *rate);
  }
  std::nth_element(steps.begin(), steps.begin() + kPersistentSteps / 2, steps.end());
  return steps[kPersistentSteps / 2];
}

bool slower_than_planned(double planned_s, double measured_s) {
  return planned_s > 0 && measured_s > 0 && measured_s > kSlowerThanPlanned * planned_s;
}

std::optional<int64_t> planned_steps(const std::string& config_json) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return std::nullopt;
  const nlohmann::json steps = config.value("/train/steps"_json_pointer, nlohmann::json());
  if (!steps.is_number_integer()) return std::nullopt;
  return steps.get<int64_t>();
}

}  // namespace kiln::store
