#include "cli/run_figures.h"

#include <cmath>

#include "cli/run_config_summary.h"
#include "cli/runs_format.h"
#include "store/metric_queries.h"

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

ListedRun describe_run(store::Database& db, store::RunRecord run, double now_s) {
  ListedRun listed;
  listed.planned_steps = planned_steps(run.config_json);
  listed.duration_s = run_duration_s(run, now_s);
  if (run.last_step) {
    std::vector<store::MetricRow> latest;
    store::for_each_metric(
        db, run.id, [&](const store::MetricRow& row) { latest.push_back(row); }, *run.last_step,
        *run.last_step);
    listed.loss = mean_over_ranks(latest, &store::MetricRow::loss);
    listed.tokens_per_s = mean_over_ranks(latest, &store::MetricRow::tokens_per_s);
    listed.mfu = mean_over_ranks(latest, &store::MetricRow::mfu);
  }
  listed.run = std::move(run);
  return listed;
}

std::string steps_text(const ListedRun& listed) {
  const std::string last = listed.run.last_step ? std::to_string(*listed.run.last_step) : kAbsent;
  return listed.planned_steps ? last + "/" + std::to_string(*listed.planned_steps) : last;
}

}  // namespace kiln
