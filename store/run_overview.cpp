#include "store/run_overview.h"

#include <utility>
#include <vector>

#include "store/json_rows.h"
#include "store/metric_queries.h"
#include "store/run_figures.h"

namespace kiln::store {

RunOverview run_overview(Database& db, RunRecord run, double now_s) {
  RunOverview overview;
  overview.planned_steps = planned_steps(run.config_json);
  overview.duration_s = run_duration_s(run, now_s);
  if (run.last_step) {
    std::vector<MetricRow> latest;
    for_each_metric(
        db, run.id, [&](const MetricRow& row) { latest.push_back(row); }, *run.last_step,
        *run.last_step);
    overview.loss = mean_over_ranks(latest, &MetricRow::loss);
    overview.tokens_per_s = mean_over_ranks(latest, &MetricRow::tokens_per_s);
    overview.mfu = mean_over_ranks(latest, &MetricRow::mfu);
  }
  overview.run = std::move(run);
  return overview;
}

nlohmann::json to_json(const RunOverview& overview) {
  nlohmann::json item = to_json(overview.run);
  item["steps"] = json_number(overview.planned_steps);
  item["loss"] = json_number(overview.loss);
  item["tokens_per_s"] = json_number(overview.tokens_per_s);
  item["mfu"] = json_number(overview.mfu);
  item["duration_s"] = json_number(overview.duration_s);
  return item;
}

}  // namespace kiln::store
