// The straggler view's reads (docs/dashboard.md#ranks): GET /api/runs/{run}/ranks (each
// rank's place and latest step, the slowest marked), GET /api/runs/{run}/rank-heat (ranks x
// steps of step time against the median rank) and GET /api/runs/{run}/alerts (the alerts
// its rules fired, newest last).
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "monitor/server/api_call.h"
#include "store/alert_rows.h"
#include "store/json_rows.h"
#include "store/rank_places.h"
#include "store/rank_queries.h"

namespace kiln::monitor {

using nlohmann::json;

namespace {

constexpr int64_t kDefaultHeatColumns = 200;
constexpr int64_t kDefaultAlerts = 100;
constexpr int64_t kMaxAlerts = 1000;

int64_t bounded(const ApiCall& call, const char* name, int64_t fallback, int64_t most) {
  const int64_t value = call.target.integer(name).value_or(fallback);
  if (value < 1 || value > most)
    throw ApiError(http::status::bad_request, std::string(name) + " must be from 1 to " + std::to_string(most));
  return value;
}

json rank_json(const store::RankState& rank, const store::RanksNow& now) {
  json item = {{"rank", rank.rank}, {"host", rank.host}, {"device", rank.device},
               {"pid", store::json_number(rank.pid)}, {"slowest", now.slowest == rank.rank}};
  if (!rank.latest) return item;
  const store::MetricRow& r = *rank.latest;
  const double working = store::working_ms(r);
  item.update({{"step", r.step},
               {"time", r.time},
               {"step_ms", store::json_number(store::step_ms(r))},
               {"working_ms", store::json_number(working)},
               {"relative", store::json_number(working / now.median_working_ms)}});
  for (const store::MetricField& field : store::kMetricFields)
    if (field.views & store::kInRanks) item[std::string(field.name)] = store::metric_json(r, field);
  return item;
}

// Rows of numbers (null where NaN); with `scale` (10^decimals), each rounded to 1 / scale.
json matrix_json(const std::vector<std::vector<double>>& rows, double scale = 0) {
  json out = json::array();
  for (const auto& row : rows) {
    json cells = json::array();
    for (double v : row) cells.push_back(store::json_number(scale > 0 ? std::round(v * scale) / scale : v));
    out.push_back(std::move(cells));
  }
  return out;
}

}  // namespace

Reply get_ranks(ApiCall& call) {
  auto db = call.reads();
  const store::RanksNow now = store::ranks_now(*db, call.run_id);
  json ranks = json::array();
  for (const auto& rank : now.ranks) ranks.push_back(rank_json(rank, now));
  return json_reply({{"run", call.run_address()},
                     {"step", store::json_number(now.step)},
                     {"slowest", now.slowest ? json(*now.slowest) : json()},
                     {"median_working_ms", store::json_number(now.median_working_ms)},
                     {"ranks", ranks}});
}

Reply get_rank_heat(ApiCall& call) {
  store::HeatQuery query;
  query.from = call.target.integer("from").value_or(query.from);
  query.to = call.target.integer("to").value_or(query.to);
  if (query.from > query.to)
    throw ApiError(http::status::bad_request,
                   "from (" + std::to_string(query.from) + ") is after to (" + std::to_string(query.to) + ")");
  query.max_columns = static_cast<size_t>(
      bounded(call, "columns", kDefaultHeatColumns, static_cast<int64_t>(store::kMaxHeatColumns)));
  query.max_rows = static_cast<size_t>(
      bounded(call, "rows", static_cast<int64_t>(store::kMaxHeatRows), static_cast<int64_t>(store::kMaxHeatRows)));
  auto db = call.reads();
  const store::RankHeat heat = store::rank_heat(*db, call.run_id, query);
  return json_reply({{"run", call.run_address()},
                     {"steps", heat.steps},
                     {"group", heat.group},
                     {"ranks", heat.ranks},
                     {"step_ms", matrix_json(heat.step_ms)},
                     // Four decimals: the strip's colours and readout show two; all 17
                     // digits were 2.4 MB of a 1,024-rank strip's 3.1 MB.
                     {"relative", matrix_json(heat.relative, 1e4)}});
}

Reply get_alerts(ApiCall& call) {
  const int64_t limit = bounded(call, "limit", kDefaultAlerts, kMaxAlerts);
  auto db = call.reads();
  store::ReadSnapshot snapshot(*db);
  std::map<int, std::string> hosts;
  for (const auto& place : store::list_rank_places(*db, call.run_id)) hosts[place.rank] = place.host;
  json alerts = json::array();
  for (const store::Alert& a : store::list_alerts(*db, call.run_id, limit)) {
    json item = {{"id", a.id},
                 {"time", a.time},
                 {"step", store::json_number(a.step)},
                 {"rule", a.rule},
                 {"rank", a.rank ? json(*a.rank) : json()},
                 {"host", a.rank && hosts.count(*a.rank) ? json(hosts[*a.rank]) : json()},
                 {"value", store::json_number(a.value)},
                 {"threshold", store::json_number(a.threshold)},
                 {"message", a.message},
                 {"action", a.action}};
    alerts.push_back(std::move(item));
  }
  return json_reply(alerts);
}

}  // namespace kiln::monitor
