// The API's reads: runs, one run, its series and rows, CSV export, comparison. Each is one
// of the store's queries; this file only maps parameters in and rows out.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "monitor/server/api_call.h"
#include "monitor/server/server_limits.h"
#include "monitor/server/spread_json.h"
#include "store/alert_rows.h"
#include "store/commands.h"
#include "store/export.h"
#include "store/json_rows.h"
#include "store/metric_queries.h"
#include "store/metric_spread.h"
#include "store/run_comparison.h"
#include "store/run_details.h"
#include "store/run_overview.h"
#include "store/run_queries.h"
#include "store/run_table.h"
#include "store/sample_queries.h"

namespace kiln::monitor {

using nlohmann::json;

namespace {

constexpr int64_t kDefaultEvents = 100;
// A sample holds up to 2 x store::kMaxSampleBytes of text: these keep an answer within a few MiB.
constexpr int64_t kDefaultSamples = 20;
constexpr int64_t kMaxSamples = 100;

template <typename Rows>
json array_of(const Rows& rows) {
  json array = json::array();
  for (const auto& row : rows) array.push_back(store::to_json(row));
  return array;
}

// {"rank": 0, "step": [...], "time": [...], "value": [...], "min": [...], "max": [...]}:
// columns, the shape charting libraries take.
json series_json(const store::RankSeries& series) {
  json step = json::array(), time = json::array(), value = json::array(), min = json::array(),
       max = json::array();
  for (const auto& p : series.points) {
    step.push_back(p.step);
    time.push_back(store::json_number(p.time));
    value.push_back(store::json_number(p.value));
    min.push_back(store::json_number(p.min));
    max.push_back(store::json_number(p.max));
  }
  return {{"rank", series.rank}, {"step", step}, {"time", time},
          {"value", value},      {"min", min},   {"max", max}};
}

// A list parameter that holds more than `most` items, or one twice, is refused before any
// work: each item costs a query and a series in the answer.
template <typename Item>
void check_list(const char* name, const std::vector<Item>& items, size_t most) {
  if (items.size() > most)
    throw ApiError(http::status::bad_request, std::string(name) + ": at most " + std::to_string(most) +
                                                  " may be asked for at once, not " + std::to_string(items.size()));
  std::set<Item> seen;
  for (const Item& item : items)
    if (!seen.insert(item).second)
      throw ApiError(http::status::bad_request, std::string(name) + ": " + fmt::format("{}", item) + " is asked for twice");
}

std::vector<int> ranks_param(const RequestTarget& target) {
  std::vector<int> ranks;
  for (const std::string& text : target.list("ranks")) {
    size_t end = 0;
    int rank = -1;
    try {
      rank = std::stoi(text, &end);
    } catch (const std::exception&) {
    }
    if (end != text.size() || rank < 0)
      throw ApiError(http::status::bad_request, "ranks: '" + text + "' is not a rank number");
    ranks.push_back(rank);
  }
  check_list("ranks", ranks, limits::kMaxSeriesRanks);
  return ranks;
}

// The export's rows, a chunk at a time, each read with a store connection borrowed for it
// alone: a client reading slowly holds neither a connection nor a snapshot.
class CsvExportChunks : public BodyChunks {
 public:
  CsvExportChunks(ConnectionPool& reads, int64_t run_id, store::Database& db) : reads_(reads), pages_(db, run_id) {}
  std::string next() override {
    auto db = reads_.borrow();
    return pages_.next(*db, limits::kCsvRowsPerChunk);
  }

 private:
  ConnectionPool& reads_;
  store::MetricsCsvPages pages_;
};

// A file name for Content-Disposition made of the run name's safe characters only.
std::string download_name(const std::string& run_name) {
  std::string name;
  for (const char c : run_name)
    name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return (name.empty() ? "run" : name) + ".csv";
}

}  // namespace

Reply get_runs(ApiCall& call) {
  store::RunFilter filter;
  if (const auto status = call.target.text("status")) filter.status = store::parse_run_status(*status);
  filter.tag = call.target.text("tag").value_or("");
  filter.name_contains = call.target.text("name").value_or("");
  filter.since = call.target.number("since");
  // where=train.lr=0.001,model.arch=llama: each a config value the runs hold.
  for (const std::string& match : call.target.list("where")) filter.config.push_back(store::parse_config_match(match));
  // q: the search box's words; KEY=VALUE words match a config value, the others a name or a tag.
  std::istringstream words(call.target.text("q").value_or(""));
  for (std::string word; words >> word;) {
    if (word.find('=') != std::string::npos) filter.config.push_back(store::parse_config_match(word));
    else filter.words.push_back(word);
  }
  store::RunOrder order;
  order.sort = call.target.text("sort").value_or(order.sort);
  const std::string direction = call.target.text("order").value_or("desc");
  if (direction != "asc" && direction != "desc") throw ApiError(http::status::bad_request, "order must be asc or desc");
  order.descending = direction == "desc";
  order.group = call.target.text("group").value_or("");
  store::check_order(order);
  const int64_t offset = call.target.integer("offset").value_or(0);
  if (offset < 0) throw ApiError(http::status::bad_request, "offset must be 0 or more");
  const int64_t limit = call.target.integer("limit").value_or(limits::kDefaultRunsPage);
  if (limit < 1 || limit > limits::kMaxRunsPage)
    throw ApiError(http::status::bad_request,
                   "limit must be from 1 to " + std::to_string(limits::kMaxRunsPage) + " (page on with offset)");
  // The runs table asks for the configs, to show, filter and group by their keys.
  const bool with_config = call.target.text("config").value_or("") == "1";
  const double now = store::unix_now();

  // Every store's lines, then one order over them all (an earlier store's run before a later
  // one's where they are equal); only the page's runs read their config and latest alert.
  std::vector<store::RunLine> lines;
  for (size_t i = 0; i < call.state.stores().size(); ++i) {
    auto db = call.state.stores()[i].reads.borrow();
    std::vector<store::RunLine> read = store::read_run_lines(*db, filter, order, now, i);
    if (lines.empty()) {
      lines = std::move(read);
      continue;
    }
    lines.reserve(lines.size() + read.size());
    std::move(read.begin(), read.end(), std::back_inserter(lines));
  }
  store::order_run_lines(lines, order);
  json page = json::array();
  for (size_t at = static_cast<size_t>(std::min<int64_t>(offset, static_cast<int64_t>(lines.size())));
       at < lines.size() && page.size() < static_cast<size_t>(limit); ++at) {
    store::RunLine& line = lines[at];
    ServedStore& served = call.state.stores()[line.source];
    auto db = served.reads.borrow();
    store::complete_line(*db, line, now);
    json item = store::to_json(line.overview);
    address_run(item, served);
    if (with_config) item["config"] = store::config_json(line.overview.run);
    // The runs table's badge: how many alerts fired, the newest in its hover.
    item["alerts"] = line.alerts;
    if (line.alerts > 0) item["latest_alert"] = line.latest_alert;
    if (!order.group.empty()) item["group"] = line.group;
    page.push_back(std::move(item));
  }
  json answer = {{"total", lines.size()}, {"offset", offset}, {"stores", call.state.stores().size()}, {"runs", std::move(page)}};
  if (!order.group.empty()) {
    json groups = json::array();
    for (const store::RunGroup& g : store::run_groups(lines)) groups.push_back({{"label", g.label}, {"runs", g.runs}});
    answer["groups"] = std::move(groups);
  }
  return json_reply(answer);
}

// The config keys of each store's newest runs, for the runs table's menus: asked apart from
// the rows, after they are drawn, since it parses hundreds of configs.
Reply get_config_keys(ApiCall& call) {
  std::set<std::string> keys;
  for (size_t i = 0; i < call.state.stores().size(); ++i) {
    auto db = call.state.stores()[i].reads.borrow();
    for (std::string& key : store::recent_config_keys(*db, limits::kConfigKeyRuns, limits::kMaxConfigKeys))
      keys.insert(std::move(key));
  }
  return json_reply(json{{"keys", std::vector<std::string>(keys.begin(), keys.end())}});
}

Reply get_run(ApiCall& call) {
  const int64_t events = call.target.integer("events").value_or(kDefaultEvents);
  if (events < 0) throw ApiError(http::status::bad_request, "events must be 0 or more");
  auto db = call.reads();
  json run = details_json(*db, store::run_details(*db, call.run_id, static_cast<size_t>(events)));
  address_run(run, *call.store);
  // A fork's parents and forks are runs of its own store.
  for (const char* side : {"ancestors", "forks"})
    for (json& link : run["lineage"][side]) link["id"] = address(*call.store, link["id"].get<int64_t>());
  return json_reply(run);
}

Reply get_metrics(ApiCall& call) {
  std::vector<std::string> keys = call.target.list("keys");
  check_list("keys", keys, limits::kMaxSeriesKeys);
  if (keys.empty()) keys.push_back("loss");
  store::SeriesQuery query;
  query.ranks = ranks_param(call.target);
  if (keys.size() * query.ranks.size() > limits::kMaxAnswerSeries)
    throw ApiError(http::status::bad_request,
                   fmt::format("keys x ranks: at most {} series may be asked for at once, not {} x {}; ask for fewer "
                               "keys or ranks at a time",
                               limits::kMaxAnswerSeries, keys.size(), query.ranks.size()));
  query.first_step = call.target.integer("from").value_or(query.first_step);
  query.last_step = call.target.integer("to").value_or(query.last_step);
  const int64_t points = call.target.integer("points").value_or(limits::kDefaultSeriesPoints);
  if (points < 0 || points > limits::kMaxSeriesPoints)
    throw ApiError(http::status::bad_request,
                   "points must be from 0 (every row) to " + std::to_string(limits::kMaxSeriesPoints));
  // Every row, up to the cap: a range of fewer steps than that comes whole (a bucket per
  // step), a longer one downsampled to the cap rather than read into memory entire.
  query.max_points = static_cast<size_t>(points == 0 ? limits::kMaxSeriesPoints : points);
  auto db = call.reads();
  // A wide run without ranks= (store/metric_spread.h): rank 0's series, and each per-rank
  // key's spread across ranks, bounded whatever the world size.
  const bool wide = query.ranks.empty() && store::has_spread(*db, call.run_id);
  if (wide) query.ranks = {0};
  // The answer's points within kMaxAnswerPoints: with many keys and ranks each series gets
  // fewer. Its series per key: the ranks asked for, rank 0 and the spread of a wide run, or
  // at most kSpreadAbove ranks of a narrow run asked for every rank.
  const size_t per_key = wide ? 2 : query.ranks.empty() ? store::kSpreadAbove : query.ranks.size();
  query.max_points = limits::points_per_series(query.max_points, keys.size() * per_key);
  query.max_rows = limits::kMaxAnswerRows / (keys.size() * (wide ? 2 : 1));  // a wide run's spread reads rows too
  json series = json::object(), spread = json::object();
  for (const std::string& key : keys) {
    query.key = key;
    json ranks = json::array();
    for (const auto& rank : store::metric_series(*db, call.run_id, query)) ranks.push_back(series_json(rank));
    series[key] = std::move(ranks);
    if (json across = wide ? spread_json(*db, call.run_id, query) : json(); !across.is_null()) spread[key] = std::move(across);
  }
  json answer = {{"run", call.run_address()}, {"series", series}};
  if (wide) answer["spread"] = std::move(spread);
  return json_reply(answer);
}

Reply get_metric_fields(ApiCall&) { return json_reply(store::metric_fields_json()); }

Reply get_valid(ApiCall& call) {
  auto db = call.reads();
  return json_reply(array_of(store::list_valid(*db, call.run_id)));
}

Reply get_samples(ApiCall& call) {
  const int64_t limit = call.target.integer("limit").value_or(kDefaultSamples);
  if (limit < 1 || limit > kMaxSamples)
    throw ApiError(http::status::bad_request, "limit must be from 1 to " + std::to_string(kMaxSamples));
  auto db = call.reads();
  return json_reply(array_of(store::list_samples(*db, call.run_id, static_cast<size_t>(limit))));
}

Reply get_system(ApiCall& call) {
  auto db = call.reads();
  return json_reply(array_of(store::list_system(*db, call.run_id, call.target.number("since").value_or(0))));
}

Reply get_events(ApiCall& call) {
  auto db = call.reads();
  return json_reply(array_of(store::list_events(*db, call.run_id, call.target.integer("after").value_or(0))));
}

Reply get_commands(ApiCall& call) {
  auto db = call.reads();
  return json_reply(array_of(store::list_commands(*db, call.run_id)));
}

Reply get_export_csv(ApiCall& call) {
  auto db = call.reads();
  Reply reply;
  reply.content_type = "text/csv; charset=utf-8";
  reply.chunks = std::make_shared<CsvExportChunks>(call.store->reads, call.run_id, *db);
  reply.content_disposition =
      "attachment; filename=\"" + download_name(store::get_run(*db, call.run_id).name) + "\"";
  return reply;
}

Reply get_compare(ApiCall& call) {
  const std::vector<std::string> typed = call.target.list("runs");
  // An unknown run is 404, as on every route with a {run}; then the store refuses fewer than
  // two runs, or one run twice (400), each run named by its address.
  std::vector<StoredRow> runs;
  for (const std::string& run : typed) runs.push_back(resolve_run(call.state.stores(), run));
  std::vector<std::string> addresses;
  for (const StoredRow& run : runs) addresses.push_back(address_text(*run.store, run.id));
  store::check_distinct_runs(typed, addresses);
  // A connection to each store the runs are in, held for the comparison.
  std::map<size_t, ConnectionPool::Lease> leases;
  std::vector<store::ComparedRun> compared;
  for (const StoredRow& run : runs) {
    auto lease = leases.find(run.store->index);
    if (lease == leases.end()) lease = leases.try_emplace(run.store->index, run.store->reads.borrow()).first;
    compared.push_back({&*lease->second, run.id});
  }
  json comparison = store::to_json(store::compare_runs(compared, call.target.number("target_loss")));
  for (const char* part : {"runs", "summary"})
    for (size_t i = 0; i < runs.size(); ++i) {
      comparison[part][i]["id"] = address(*runs[i].store, runs[i].id);
      comparison[part][i]["store"] = runs[i].store->label;
    }
  return json_reply(comparison);
}

}  // namespace kiln::monitor
