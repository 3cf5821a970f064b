#include "store/metric_queries.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "store/error.h"
#include "store/rows.h"
#include "store/run_queries.h"

namespace kiln::store {
namespace {

constexpr std::array<std::string_view, 17> kKeys = {
    "loss",    "lr",      "grad_norm", "tokens_per_s", "tflops",   "mfu",
    "fwd_ms",  "bwd_ms",  "opt_ms",    "comm_ms",      "data_ms",  "mem_used",
    "mem_peak", "loss_scale", "skipped_steps", "tokens", "time"};

void check_key(const std::string& key) {
  if (std::find(kKeys.begin(), kKeys.end(), key) != kKeys.end()) return;
  std::string valid;
  for (auto k : kKeys) valid += (valid.empty() ? "" : ", ") + std::string(k);
  fail("store: unknown metric '" + key + "' (valid: " + valid + ")");
}

// The present step range within [first, last], or nothing when no row is there. Two
// index lookups: ORDER BY ... LIMIT 1 walks the primary key from either end.
std::optional<std::pair<int64_t, int64_t>> step_range(Database& db, int64_t run_id,
                                                      const SeriesQuery& q,
                                                      const std::string& ranks) {
  const std::string where =
      " FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ?" + ranks + " AND " + q.key +
      " IS NOT NULL";
  Statement& lo = db.cached("SELECT step" + where + " ORDER BY step LIMIT 1");
  lo.bind_all(run_id, q.first_step, q.last_step);
  if (!lo.step()) return std::nullopt;
  const int64_t first = lo.int64(0);
  lo.reset();
  Statement& hi = db.cached("SELECT step" + where + " ORDER BY step DESC LIMIT 1");
  hi.bind_all(run_id, q.first_step, q.last_step);
  hi.step();
  const int64_t last = hi.int64(0);
  hi.reset();
  return std::make_pair(first, last);
}

}  // namespace

std::span<const std::string_view> metric_keys() { return kKeys; }

std::vector<RankSeries> metric_series(Database& db, int64_t run_id, const SeriesQuery& q) {
  check_key(q.key);
  get_run(db, run_id);  // an unknown run is an error, not an empty chart

  // Ranks are integers: inlining them keeps one cached statement per rank set.
  std::string ranks;
  if (!q.ranks.empty()) {
    ranks = " AND rank IN (";
    for (size_t i = 0; i < q.ranks.size(); ++i)
      ranks += (i ? "," : "") + std::to_string(q.ranks[i]);
    ranks += ")";
  }
  const auto range = step_range(db, run_id, q, ranks);
  if (!range) return {};
  // Bucket width in steps: the range cut into at most max_points buckets.
  const uint64_t span = static_cast<uint64_t>(range->second) - static_cast<uint64_t>(range->first);
  const uint64_t width =
      q.max_points == 0 || span < q.max_points ? 1 : span / q.max_points + 1;

  // The primary key is (run_id, step, rank): this walks it in order, no sort.
  Statement& st = db.cached("SELECT step, rank, time, " + q.key +
                            " FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ?" + ranks +
                            " AND " + q.key + " IS NOT NULL ORDER BY step, rank");
  st.bind_all(run_id, range->first, range->second);

  struct Open {
    RankSeries series;
    uint64_t bucket = 0;
    bool has = false;
    SeriesPoint point;
  };
  std::vector<Open> open;       // by rank when ranks are small and dense
  std::map<int, Open> sparse;   // otherwise
  auto slot = [&](int rank) -> Open& {
    if (rank >= 0 && rank < 65536) {
      if (static_cast<size_t>(rank) >= open.size()) open.resize(static_cast<size_t>(rank) + 1);
      return open[static_cast<size_t>(rank)];
    }
    return sparse[rank];
  };

  while (st.step()) {
    const int64_t step = st.int64(0);
    const int rank = static_cast<int>(st.int64(1));
    const double time = st.real(2);
    const double value = st.real(3);
    Open& o = slot(rank);
    const uint64_t bucket = (static_cast<uint64_t>(step) - static_cast<uint64_t>(range->first)) / width;
    if (o.has && bucket == o.bucket) {
      o.point.step = step;
      o.point.time = time;
      o.point.value = value;
      o.point.min = std::min(o.point.min, value);
      o.point.max = std::max(o.point.max, value);
      continue;
    }
    if (o.has) o.series.points.push_back(o.point);
    o.series.rank = rank;
    o.has = true;
    o.bucket = bucket;
    o.point = SeriesPoint{step, time, value, value, value};
  }

  std::vector<RankSeries> result;
  auto close = [&](Open& o) {
    if (!o.has) return;
    o.series.points.push_back(o.point);
    result.push_back(std::move(o.series));
  };
  for (auto& [rank, o] : sparse)
    if (rank < 0) close(o);
  for (auto& o : open) close(o);
  for (auto& [rank, o] : sparse)
    if (rank >= 0) close(o);
  return result;
}

void for_each_metric(Database& db, int64_t run_id,
                     const std::function<void(const MetricRow&)>& visit, int64_t first_step,
                     int64_t last_step) {
  static const std::string sql = std::string("SELECT ") + kMetricColumns +
                                 " FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ? "
                                 "ORDER BY step, rank";
  // Its own statement, not the cache: `visit` may run other queries on this connection.
  Statement st(db, sql);
  st.bind_all(run_id, first_step, last_step);
  while (st.step()) visit(read_metric(st));
}

RunSummary summarize_run(Database& db, int64_t run_id, std::optional<double> target_loss) {
  const RunRecord run = get_run(db, run_id);
  RunSummary s;
  s.run_id = run.id;
  s.name = run.name;
  s.status = run.status;
  s.last_step = run.last_step;

  // One pass over the steps, in primary-key order: per-step means over ranks.
  Statement& st = db.cached(
      "SELECT step, avg(loss), avg(tokens_per_s), avg(tflops), avg(mfu), max(time) "
      "FROM metrics WHERE run_id = ? GROUP BY step ORDER BY step");
  st.bind(1, run_id);
  double first_time = kNoValue, last_time = kNoValue;
  // Sums over the steps after the first, and the first step's values (used only when the
  // run logged one step).
  std::array<double, 3> sum{0, 0, 0}, first{kNoValue, kNoValue, kNoValue};
  std::array<int64_t, 3> count{0, 0, 0};
  while (st.step()) {
    const int64_t step = st.int64(0);
    const double loss = st.real(1);
    const double time = st.real(5);
    if (s.logged_steps == 0) first_time = time;
    last_time = time;
    if (!std::isnan(loss)) {
      s.final_loss = loss;
      if (std::isnan(s.best_loss) || loss < s.best_loss) {
        s.best_loss = loss;
        s.best_step = step;
      }
      if (target_loss && !s.target_step && loss <= *target_loss) {
        s.target_step = step;
        s.time_to_target_s = time - run.started_at.value_or(first_time);
      }
    }
    for (size_t k = 0; k < 3; ++k) {
      const int column = static_cast<int>(k) + 2;  // tokens_per_s, tflops, mfu
      if (s.logged_steps == 0) {
        first[k] = st.real(column);  // the first logged step carries warm-up: kept aside
      } else if (!st.is_null(column)) {
        sum[k] += st.real(column);
        ++count[k];
      }
    }
    ++s.logged_steps;
  }
  std::array<double, 3> mean = first;
  for (size_t k = 0; k < 3; ++k)
    if (count[k] > 0) mean[k] = sum[k] / static_cast<double>(count[k]);
  s.mean_tokens_per_s = mean[0];
  s.mean_tflops = mean[1];
  s.mean_mfu = mean[2];
  if (s.logged_steps > 0) s.elapsed_s = last_time - run.started_at.value_or(first_time);

  Statement& valid = db.cached("SELECT min(loss) FROM valid_metrics WHERE run_id = ?");
  valid.bind(1, run_id);
  if (valid.step()) s.best_valid_loss = valid.real(0);
  valid.reset();
  return s;
}

}  // namespace kiln::store
