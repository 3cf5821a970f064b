#include "monitor/server/spread_json.h"

#include "store/json_rows.h"
#include "store/metric_fields.h"
#include "store/metric_spread.h"

namespace kiln::monitor {

nlohmann::json spread_json(store::Database& db, int64_t run_id, const store::SeriesQuery& query) {
  using nlohmann::json;
  const store::MetricField* field = store::find_metric_field(query.key);
  if (!field || field->spread != store::RankSpread::PerRank || store::is_row_key(*field)) return nullptr;
  json step = json::array(), time = json::array(), ranks = json::array(), min = json::array(),
       mean = json::array(), max = json::array(), slowest_rank = json::array(), slowest = json::array();
  for (const store::SpreadPoint& p :
       store::spread_series(db, run_id, query.key, query.first_step, query.last_step, query.max_points,
                           query.max_rows)) {
    step.push_back(p.step);
    time.push_back(store::json_number(p.time));
    ranks.push_back(p.ranks);
    min.push_back(store::json_number(p.min));
    mean.push_back(store::json_number(p.mean));
    max.push_back(store::json_number(p.max));
    slowest_rank.push_back(p.slow_rank);
    slowest.push_back(store::json_number(p.slow));
  }
  return {{"step", step}, {"time", time}, {"ranks", ranks},   {"min", min},
          {"mean", mean}, {"max", max},   {"slowest_rank", slowest_rank}, {"slowest", slowest}};
}

nlohmann::json step_spreads_json(store::Database& db, int64_t run_id, int64_t first_step, int64_t last_step) {
  nlohmann::json spreads = nlohmann::json::object();
  store::SeriesQuery query;
  query.first_step = first_step;
  query.last_step = last_step;
  query.max_points = 0;  // a point a step
  for (const store::MetricField* field : store::spread_fields()) {
    query.key = field->name;
    nlohmann::json spread = spread_json(db, run_id, query);
    if (!spread.is_null() && !spread["step"].empty()) spreads[query.key] = std::move(spread);
  }
  return spreads;
}

nlohmann::json details_json(store::Database& db, const store::RunDetails& d) {
  nlohmann::json out = store::to_json(d);
  if (d.run.last_step && d.latest_ranks > static_cast<int64_t>(d.latest.size()))
    out["latest_spread"] = step_spreads_json(db, d.run.id, *d.run.last_step, *d.run.last_step);
  return out;
}

}  // namespace kiln::monitor
