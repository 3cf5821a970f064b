#include "store/rank_queries.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "store/metric_blocks.h"
#include "store/metric_spread.h"
#include "store/rank_places.h"
#include "store/rows.h"
#include "store/run_queries.h"

namespace kiln::store {
namespace {

double sum_measured(std::initializer_list<double> parts) {
  double sum = 0;
  bool any = false;
  for (double part : parts)
    if (!std::isnan(part)) {
      sum += part;
      any = true;
    }
  return any ? sum : kNoValue;
}

// Every rank's row at `step`, by rank.
std::vector<MetricRow> rows_at(Database& db, int64_t run_id, int64_t step) {
  static const std::string sql =
      "SELECT " + metric_column_list() + " FROM metrics WHERE run_id = ? AND step = ? ORDER BY rank";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, step);
  std::vector<MetricRow> rows;
  while (st.step()) rows.push_back(read_metric(st));
  st.reset();
  return rows;
}

// The first (or, descending, the last) logged step in [from, to].
std::optional<int64_t> edge_step(Database& db, int64_t run_id, int64_t from, int64_t to, bool last) {
  Statement& st = db.cached(last ? "SELECT step FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step DESC LIMIT 1"
                                 : "SELECT step FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step LIMIT 1");
  st.bind_all(run_id, from, to);
  std::optional<int64_t> step;
  if (st.step()) step = st.int64(0);
  st.reset();
  return step;
}

// One column of the strip: each row's slowest rank at the step.
void add_column(RankHeat& heat, const std::vector<MetricRow>& rows) {
  std::vector<double> working;
  for (const MetricRow& r : rows) working.push_back(working_ms(r));
  const double median = median_of(working);
  std::vector<double> row_step(heat.ranks.size(), kNoValue), row_relative(heat.ranks.size(), kNoValue);
  std::vector<double> row_working(heat.ranks.size(), kNoValue);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].rank < 0) continue;
    const size_t row = static_cast<size_t>(rows[i].rank / heat.group);
    if (row >= heat.ranks.size()) continue;  // a rank of an earlier, larger layout
    const double ms = step_ms(rows[i]);
    if (std::isnan(ms)) continue;
    if (!std::isnan(row_step[row]) && !(working[i] > row_working[row])) continue;
    row_step[row] = ms;
    row_working[row] = working[i];
    row_relative[row] = median > 0 ? working[i] / median : kNoValue;
  }
  heat.steps.push_back(rows.front().step);
  for (size_t row = 0; row < heat.ranks.size(); ++row) {
    heat.step_ms[row].push_back(row_step[row]);
    heat.relative[row].push_back(row_relative[row]);
  }
}

}  // namespace

double step_ms(const MetricRow& r) { return sum_measured({r.fwd_ms, r.bwd_ms, r.opt_ms, r.comm_ms, r.data_ms}); }

double working_ms(const MetricRow& r) { return sum_measured({r.fwd_ms, r.bwd_ms, r.opt_ms}); }

double median_of(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.empty()) return kNoValue;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::optional<size_t> slowest_of(std::span<const MetricRow> rows) {
  std::optional<size_t> slowest;
  size_t measured = 0;
  double fastest = kNoValue;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double ms = working_ms(rows[i]);
    if (std::isnan(ms)) continue;
    ++measured;
    if (std::isnan(fastest) || ms < fastest) fastest = ms;
    if (!slowest || ms > working_ms(rows[*slowest])) slowest = i;
  }
  if (measured < 2 || !(working_ms(rows[*slowest]) > fastest)) return std::nullopt;
  return slowest;
}

RanksNow ranks_now(Database& db, int64_t run_id) {
  ReadSnapshot snapshot(db);
  const RunRecord run = get_run(db, run_id);
  RanksNow now;
  std::map<int, RankState> by_rank;
  for (RankPlace& place : list_rank_places(db, run_id))
    by_rank[place.rank] = RankState{place.rank, std::move(place.host), std::move(place.device), place.pid, {}};
  if (run.last_step) {
    now.step = run.last_step;
    const std::vector<MetricRow> rows = rows_at(db, run_id, *run.last_step);
    if (const auto slowest = slowest_of(rows)) now.slowest = rows[*slowest].rank;
    std::vector<double> working;
    for (const MetricRow& row : rows) {
      working.push_back(working_ms(row));
      RankState& state = by_rank[row.rank];
      state.rank = row.rank;
      state.latest = row;
    }
    now.median_working_ms = median_of(std::move(working));
  }
  for (auto& [rank, state] : by_rank) now.ranks.push_back(std::move(state));
  return now;
}

RankHeat rank_heat(Database& db, int64_t run_id, const HeatQuery& q) {
  ReadSnapshot snapshot(db);
  get_run(db, run_id);  // an unknown run is an error, not an empty strip
  RankHeat heat;
  const size_t max_rows = std::clamp<size_t>(q.max_rows, 1, kMaxHeatRows);
  const std::vector<int> ranks = block_ranks(db, run_id);
  // Before the recent window only rank 0's rows are left: a column there would be one rank.
  const int64_t from = std::max(q.from, pruned_before(db, run_id).value_or(q.from));
  const auto lo = edge_step(db, run_id, from, q.to, false);
  if (!lo || ranks.empty() || ranks.back() < 0 || q.max_columns == 0) return heat;
  const int64_t hi = *edge_step(db, run_id, from, q.to, true);

  const size_t world = static_cast<size_t>(ranks.back()) + 1;
  heat.group = static_cast<int>((world + max_rows - 1) / max_rows);
  for (size_t first = 0; first < world; first += static_cast<size_t>(heat.group)) heat.ranks.push_back(static_cast<int>(first));
  heat.step_ms.resize(heat.ranks.size());
  heat.relative.resize(heat.ranks.size());
  const size_t columns = std::min({q.max_columns, kMaxHeatColumns, std::max<size_t>(1, kMaxHeatCells / world)});

  int64_t next = *lo;
  const double span = static_cast<double>(hi) - static_cast<double>(*lo);
  for (size_t i = 0; i < columns && next <= hi; ++i) {
    const double mark = columns == 1 ? static_cast<double>(*lo)
                                     : static_cast<double>(*lo) + span * static_cast<double>(i) / static_cast<double>(columns - 1);
    const int64_t at = std::max(next, std::min(hi, static_cast<int64_t>(mark)));
    const auto step = edge_step(db, run_id, at, hi, false);
    if (!step) break;
    add_column(heat, rows_at(db, run_id, *step));
    next = *step + 1;
  }
  return heat;
}

std::optional<int64_t> recent_from(Database& db, int64_t run_id, size_t steps) {
  Statement& st = db.cached("SELECT step FROM metrics WHERE run_id = ? AND step < ? ORDER BY step DESC LIMIT 1");
  std::optional<int64_t> from;
  int64_t below = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < steps; ++i) {
    st.bind_all(run_id, below);
    const bool found = st.step();
    if (found) below = st.int64(0);
    st.reset();
    if (!found) break;
    from = below;
  }
  return from;
}

}  // namespace kiln::store
