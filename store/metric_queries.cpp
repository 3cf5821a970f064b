#include "store/metric_queries.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "store/error.h"
#include "store/metric_blocks.h"
#include "store/metric_spread.h"
#include "store/rows.h"
#include "store/run_queries.h"

namespace kiln::store {
namespace {

void check_key(const std::string& key) {
  const auto keys = metric_keys();
  if (std::find(keys.begin(), keys.end(), key) != keys.end()) return;
  std::string valid;
  for (auto k : keys) valid += (valid.empty() ? "" : ", ") + std::string(k);
  fail("store: unknown metric '" + key + "' (valid: " + valid + ")");
}

// The wanted ranks as a JSON array bound to ?4, or NULL for every rank. Bound, not written
// into the SQL: each distinct SQL text is a statement prepared and kept per connection, and a
// client asking for one rank set after another must not grow that cache.
constexpr const char* kRankFilter = " AND (?4 IS NULL OR rank IN (SELECT value FROM json_each(?4)))";

using RankList = std::optional<std::string>;

// The lowest step in [first, last] where one of the ranks has a value of the key: a walk
// of the primary key (run_id, step, rank) from `first` that stops at the first match.
std::optional<int64_t> first_step_with_value(Database& db, int64_t run_id,
                                             const std::string& key, const RankList& ranks,
                                             int64_t first, int64_t last) {
  Statement& st = db.cached("SELECT step FROM metrics WHERE run_id = ?1 AND step BETWEEN ?2 AND ?3" +
                            std::string(kRankFilter) + " AND " + key + " IS NOT NULL ORDER BY step LIMIT 1");
  st.bind_all(run_id, first, last, ranks);
  std::optional<int64_t> step;
  if (st.step()) step = st.int64(0);
  st.reset();
  return step;
}

// The series from the rows in [first, last], in buckets of `width` steps from `first`.
std::vector<RankSeries> series_from_rows(Database& db, int64_t run_id, const std::string& key,
                                         const RankList& ranks, int64_t first, int64_t last,
                                         uint64_t width) {
  // The primary key is (run_id, step, rank). Every rank: a walk of it in order, no sort. Some
  // ranks: a walk of the range would read every rank's rows to keep a few (a rank-0 chart of
  // a 4,096-rank run read 4,096 rows a step), so it seeks from one logged step to the next
  // and, at each, to each wanted rank's row.
  Statement& st = ranks ? db.cached(R"sql(
      WITH RECURSIVE steps(step) AS (
        SELECT min(step) FROM metrics WHERE run_id = ?1 AND step BETWEEN ?2 AND ?3
        UNION ALL
        SELECT (SELECT min(step) FROM metrics WHERE run_id = ?1 AND step > steps.step AND step <= ?3)
        FROM steps WHERE steps.step IS NOT NULL)
      SELECT m.step, m.rank, m.time, m.)sql" + key + R"sql(
      FROM steps CROSS JOIN json_each(?4) AS wanted CROSS JOIN metrics AS m
        ON m.run_id = ?1 AND m.step = steps.step AND m.rank = wanted.value
      WHERE m.)sql" + key + " IS NOT NULL ORDER BY m.step, m.rank")
                        : db.cached("SELECT step, rank, time, " + key +
                                    " FROM metrics WHERE run_id = ?1 AND step BETWEEN ?2 AND ?3 AND " + key +
                                    " IS NOT NULL ORDER BY step, rank");
  if (ranks) st.bind_all(run_id, first, last, ranks);
  else st.bind_all(run_id, first, last);

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
    const uint64_t bucket = (static_cast<uint64_t>(step) - static_cast<uint64_t>(first)) / width;
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

// One rank's aggregates of the key, per unit (block or superblock) with a value in a range,
// by unit.
struct RankBlocks {
  int rank = 0;
  std::vector<KeyBlock> blocks;
};

// The wanted ranks, ascending and once each; every rank with blocks when none are named.
std::vector<int> wanted_ranks(Database& db, int64_t run_id, const SeriesQuery& q) {
  std::vector<int> ranks = q.ranks.empty() ? block_ranks(db, run_id) : q.ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

int64_t unit_of(Level level, int64_t step) {
  return level == Level::Block ? block_of(step) : superblock_of(block_of(step));
}
int64_t first_step_in(Level level, int64_t unit) {
  return first_step_of(level == Level::Block ? unit : first_block_of(unit));
}
int64_t last_step_in(Level level, int64_t unit) {
  return last_step_of(level == Level::Block ? unit : last_block_of(unit));
}

std::vector<RankBlocks> units_in_range(Database& db, int64_t run_id, const std::vector<int>& ranks, size_t key,
                                       Level level, int64_t first, int64_t last);

// Per rank, the key's aggregate over [first, last], a part of one unit of `level`: from the
// rows under a block, from the blocks (and their cut edges' rows) under a superblock.
std::map<int, KeyAggregate> part_of_unit(Database& db, int64_t run_id, const std::vector<int>& ranks, size_t key,
                                         Level level, int64_t first, int64_t last) {
  if (level == Level::Block) return aggregate_key_rows(db, run_id, key, ranks, first, last);
  std::map<int, KeyAggregate> part;
  for (const RankBlocks& r : units_in_range(db, run_id, ranks, key, Level::Block, first, last))
    for (const KeyBlock& b : r.blocks) part[r.rank].merge(b.aggregate);
  return part;
}

// Every wanted rank's units of `level` in [first, last], ranks without a value left out.
// Whole units come from the level's table. A unit the range cuts also counts steps outside
// it, so the (at most two) cut units are aggregated from the level below within the range.
std::vector<RankBlocks> units_in_range(Database& db, int64_t run_id, const std::vector<int>& ranks, size_t key,
                                       Level level, int64_t first, int64_t last) {
  const int64_t head = unit_of(level, first), tail = unit_of(level, last);
  const bool cut_head = first > first_step_in(level, head);
  // One unit cut at both ends is read whole as the head.
  const bool cut_tail = last < last_step_in(level, tail) && !(cut_head && head == tail);
  std::map<int, KeyAggregate> head_part, tail_part;
  if (cut_head)
    head_part = part_of_unit(db, run_id, ranks, key, level, first, std::min(last_step_in(level, head), last));
  if (cut_tail)
    tail_part = part_of_unit(db, run_id, ranks, key, level, std::max(first_step_in(level, tail), first), last);

  std::vector<RankBlocks> result;
  for (const int rank : ranks) {
    RankBlocks r{rank, {}};
    if (const auto it = head_part.find(rank); it != head_part.end() && it->second.present())
      r.blocks.push_back({head, it->second});
    const std::vector<KeyBlock> whole =
        read_key_blocks(db, run_id, rank, key, head + (cut_head ? 1 : 0), tail - (cut_tail ? 1 : 0), level);
    r.blocks.insert(r.blocks.end(), whole.begin(), whole.end());
    if (const auto it = tail_part.find(rank); it != tail_part.end() && it->second.present())
      r.blocks.push_back({tail, it->second});
    if (!r.blocks.empty()) result.push_back(std::move(r));
  }
  return result;
}

// The units the ranks' values span and the last step with one.
struct Extent {
  int64_t first_unit = std::numeric_limits<int64_t>::max();
  int64_t last_unit = std::numeric_limits<int64_t>::min();
  int64_t last_step = std::numeric_limits<int64_t>::min();
  std::vector<int> ranks;  // those with a value
};

Extent extent_of(const std::vector<RankBlocks>& units) {
  Extent e;
  for (const auto& r : units) {
    e.first_unit = std::min(e.first_unit, r.blocks.front().block);
    e.last_unit = std::max(e.last_unit, r.blocks.back().block);
    e.last_step = std::max(e.last_step, r.blocks.back().aggregate.last_step);
    e.ranks.push_back(r.rank);
  }
  return e;
}

// The first block in [first, last] with a value, inside the first superblock with one: a
// seek per rank that has a value there, usually answered by its first block.
int64_t first_block_with_value(Database& db, int64_t run_id, const std::vector<RankBlocks>& superblocks,
                               size_t key, int64_t first, int64_t last) {
  const Extent e = extent_of(superblocks);
  int64_t found = std::numeric_limits<int64_t>::max();
  for (const auto& r : superblocks) {
    if (r.blocks.front().block != e.first_unit) continue;
    const int64_t from = block_of(std::max(first, first_step_in(Level::Superblock, e.first_unit)));
    const int64_t to = std::min(found - 1, block_of(std::min(last, last_step_in(Level::Superblock, e.first_unit))));
    if (from > to) continue;
    if (const auto block = first_key_block(db, run_id, r.rank, key, from, to)) found = *block;
  }
  if (found == std::numeric_limits<int64_t>::max())
    fail("store: the metric blocks of run " + std::to_string(run_id) + " in " + db.path() +
         " disagree with its superblocks (superblock " + std::to_string(e.first_unit) + " has none)");
  return found;
}

// The series from units: bucket b holds units first_unit + b * per_bucket onwards.
std::vector<RankSeries> series_from_blocks(const std::vector<RankBlocks>& ranks, int64_t first_unit,
                                           uint64_t per_bucket) {
  std::vector<RankSeries> result;
  for (const auto& r : ranks) {
    RankSeries series{r.rank, {}};
    KeyAggregate bucket;
    uint64_t index = 0;
    auto close = [&] {
      series.points.push_back(
          SeriesPoint{bucket.last_step, bucket.last_time, bucket.last, bucket.min, bucket.max});
    };
    for (const auto& b : r.blocks) {
      const uint64_t i =
          (static_cast<uint64_t>(b.block) - static_cast<uint64_t>(first_unit)) / per_bucket;
      if (bucket.present() && i != index) {
        close();
        bucket = KeyAggregate{};
      }
      index = i;
      bucket.merge(b.aggregate);
    }
    if (bucket.present()) close();
    result.push_back(std::move(series));
  }
  return result;
}

uint64_t per_bucket(uint64_t units, size_t points) {
  return points == 0 ? 1 : units / points + (units % points != 0 ? 1 : 0);
}

// The series over [first, last] from the rollup, in `points` buckets at most: of whole blocks
// from first_block's, or, when a bucket would span a superblock's 64 blocks or more, or the
// blocks would read more than max_rows, of whole superblocks from the first one's. The
// superblocks are already read: the first level every series reads.
std::vector<RankSeries> series_from_rollup(Database& db, int64_t run_id, size_t key,
                                           const std::vector<RankBlocks>& superblocks, int64_t first_block,
                                           int64_t first, int64_t last, size_t points, size_t max_rows) {
  const Extent e = extent_of(superblocks);
  const uint64_t blocks = static_cast<uint64_t>(block_of(e.last_step)) - static_cast<uint64_t>(first_block) + 1;
  const uint64_t per_block_bucket = per_bucket(blocks, points);
  if (per_block_bucket < static_cast<uint64_t>(kBlocksPerSuperblock) &&
      (max_rows == 0 || blocks * e.ranks.size() <= max_rows))
    return series_from_blocks(units_in_range(db, run_id, e.ranks, key, Level::Block, first, last), first_block,
                              per_block_bucket);
  const uint64_t count = static_cast<uint64_t>(e.last_unit) - static_cast<uint64_t>(e.first_unit) + 1;
  return series_from_blocks(superblocks, e.first_unit, per_bucket(count, points));
}

// The series as the rows and blocks hold it (metric_series without the pruning).
std::vector<RankSeries> series_in(Database& db, int64_t run_id, const SeriesQuery& q) {
  const RankList ranks = rank_array(q.ranks);
  if (q.max_points == 0)
    return series_from_rows(db, run_id, q.key, ranks, q.first_step, q.last_step, 1);

  // The superblocks give the present step range without a walk over rows or blocks: the last
  // step is in their aggregates; the first is in the first one, found by a seek among its
  // blocks and an index walk of the rows from there (a stored block the range cuts may hold
  // its values before the range: the walk goes on to the next).
  const size_t key = key_index(q.key);
  const std::vector<RankBlocks> superblocks =
      units_in_range(db, run_id, wanted_ranks(db, run_id, q), key, Level::Superblock, q.first_step, q.last_step);
  if (superblocks.empty()) return {};
  const Extent e = extent_of(superblocks);
  const int64_t from = first_block_with_value(db, run_id, superblocks, key, q.first_step, q.last_step);
  const auto first =
      first_step_with_value(db, run_id, q.key, ranks, std::max(first_step_of(from), q.first_step),
                            std::min(last_step_in(Level::Superblock, e.first_unit), q.last_step));
  if (!first)
    fail("store: the metric blocks of run " + std::to_string(run_id) + " in " + db.path() +
         " disagree with its rows (superblock " + std::to_string(e.first_unit) + " has none)");
  const int64_t last = e.last_step;

  // Bucket width in steps: the range cut into at most max_points buckets. Below a block's
  // width, and within max_rows, the buckets come from the rows; otherwise from the rollup.
  const uint64_t span = static_cast<uint64_t>(last) - static_cast<uint64_t>(*first);
  const uint64_t width = span < q.max_points ? 1 : span / q.max_points + 1;
  const bool rows_allowed = q.max_rows == 0 || (span + 1) * superblocks.size() <= q.max_rows;
  if (width < static_cast<uint64_t>(kStepsPerBlock) && rows_allowed)
    return series_from_rows(db, run_id, q.key, ranks, *first, last, width);
  return series_from_rollup(db, run_id, key, superblocks, block_of(*first), q.first_step, q.last_step,
                            q.max_points, q.max_rows);
}

// The series of ranks whose rows before `window` were pruned (metric_spread.h): whole blocks
// (or superblocks) up to the last block with a pruned step, then the rows and blocks after
// it, each part with half the points.
std::vector<RankSeries> pruned_series(Database& db, int64_t run_id, const SeriesQuery& q, int64_t window) {
  const int64_t split = first_step_of(block_of(window - 1) + 1);
  const bool recent = q.last_step >= split;
  // Whole blocks: the rows that would cut one are gone.
  const int64_t first = first_step_of(block_of(q.first_step));
  const int64_t last = std::min(last_step_of(block_of(q.last_step)), split - 1);
  const size_t old_points = recent ? std::max<size_t>(1, q.max_points / 2) : std::max<size_t>(1, q.max_points);
  const size_t key = key_index(q.key);
  const std::vector<RankBlocks> superblocks =
      units_in_range(db, run_id, wanted_ranks(db, run_id, q), key, Level::Superblock, first, last);
  std::vector<RankSeries> result;
  if (!superblocks.empty())
    result = series_from_rollup(db, run_id, key, superblocks,
                                first_block_with_value(db, run_id, superblocks, key, first, last), first, last,
                                q.max_points == 0 ? 0 : old_points, q.max_rows);
  if (!recent) return result;
  SeriesQuery later = q;
  later.first_step = split;
  if (q.max_points > 0) later.max_points = q.max_points - q.max_points / 2;
  std::map<int, size_t> at;
  for (size_t i = 0; i < result.size(); ++i) at[result[i].rank] = i;
  for (RankSeries& r : series_in(db, run_id, later)) {
    const auto it = at.find(r.rank);
    if (it == at.end()) {
      at[r.rank] = result.size();
      result.push_back(std::move(r));
    } else {
      auto& points = result[it->second].points;
      points.insert(points.end(), r.points.begin(), r.points.end());
    }
  }
  std::sort(result.begin(), result.end(), [](const RankSeries& a, const RankSeries& b) { return a.rank < b.rank; });
  return result;
}

}  // namespace

std::span<const std::string_view> metric_keys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> out;
    for (const MetricField* f : block_fields()) out.push_back(f->name);
    return out;
  }();
  return keys;
}

std::vector<RankSeries> metric_series(Database& db, int64_t run_id, const SeriesQuery& q) {
  check_key(q.key);
  ReadSnapshot snapshot(db);  // the blocks, the rows and the range from the same commits
  get_run(db, run_id);        // an unknown run is an error, not an empty chart
  // Rank 0 keeps every row; the others' old rows may be gone, their blocks stand in.
  const bool rank0_only = !q.ranks.empty() && std::all_of(q.ranks.begin(), q.ranks.end(), [](int r) { return r == 0; });
  if (!rank0_only)
    if (const std::optional<int64_t> window = pruned_before(db, run_id);
        window && q.first_step < *window)
      return pruned_series(db, run_id, q, *window);
  return series_in(db, run_id, q);
}

void for_each_metric(Database& db, int64_t run_id,
                     const std::function<void(const MetricRow&)>& visit, int64_t first_step,
                     int64_t last_step) {
  static const std::string sql = "SELECT " + metric_column_list() +
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
