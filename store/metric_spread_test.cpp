// The spread of a wide step across ranks, as the writer keeps it commit after commit, and the
// recent-only rows of ranks other than 0 it makes affordable.
#include "store/metric_spread.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <utility>

#include <fmt/core.h>

#include "store/batch_rows.h"
#include "store/metric_blocks.h"
#include "store/metric_fields.h"
#include "store/metric_queries.h"
#include "store/rank_queries.h"
#include "store/rewind_rows.h"
#include "store/run_details.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::StoreTest;

constexpr int kWide = static_cast<int>(kSpreadAbove) + 2;  // 10 ranks

// Rank r's row of `step`: forward time 1 + r / 2 ms but rank 3 the slow one at 50 ms, and
// throughput 1000 (r + 1) tokens/s but rank 6 the slow one at 10.
MetricRow spread_row(int64_t step, int rank, double fwd_scale = 1) {
  MetricRow row = testing_util::interval(step, rank + 1).back();
  row.fwd_ms = fwd_scale * (rank == 3 ? 50.0 : 1.0 + rank / 2.0);
  row.tokens_per_s = rank == 6 ? 10.0 : 1000.0 * (rank + 1);
  return row;
}

std::vector<MetricRow> ranks_of(int64_t step, int first, int end, double fwd_scale = 1) {
  std::vector<MetricRow> rows;
  for (int r = first; r < end; ++r) rows.push_back(spread_row(step, r, fwd_scale));
  return rows;
}

// A step's rows, rank r's fwd_ms the r-th value (NaN: not measured), logged at 1e9 + step.
std::vector<MetricRow> fwd_step(int64_t step, const std::vector<double>& fwd_ms) {
  std::vector<MetricRow> rows;
  for (size_t r = 0; r < fwd_ms.size(); ++r) {
    MetricRow row;
    row.step = step;
    row.rank = static_cast<int>(r);
    row.time = 1e9 + static_cast<double>(step);
    row.fwd_ms = fwd_ms[r];
    rows.push_back(row);
  }
  return rows;
}

// Every row the store holds of a run, by step and rank: what its spread summarizes.
using StoredRows = std::map<int64_t, std::map<int, MetricRow>>;

// What a walk of the rows answers for the field over the wide steps in [lo, hi], in buckets
// of `width` steps from `origin`, computed from the rows themselves: a bucket's values in
// (step, rank) order, its min and max the first of them at each extreme, its point at its
// last wide step.
std::vector<SpreadPoint> walk_of_rows(const StoredRows& rows, const MetricField& field, int64_t lo, int64_t hi,
                                      int64_t origin, int64_t width) {
  struct Bucket {
    SpreadPoint point;
    std::vector<std::pair<double, int>> values;
  };
  std::map<int64_t, Bucket> buckets;
  for (const auto& [step, ranks] : rows) {
    if (step < lo || step > hi || ranks.size() <= kSpreadAbove) continue;
    Bucket& b = buckets[(step - origin) / width];
    b.point.step = step;
    b.point.ranks = static_cast<int64_t>(ranks.size());
    b.point.time = 0;
    for (const auto& [rank, row] : ranks) {
      b.point.time = std::max(b.point.time, row.time);
      if (const double v = metric_value(row, field); !std::isnan(v)) b.values.emplace_back(v, rank);
    }
  }
  std::vector<SpreadPoint> points;
  for (auto& [index, b] : buckets) {
    if (b.values.empty()) continue;
    std::pair<double, int> lowest = b.values.front(), highest = b.values.front();
    double sum = 0;
    for (const auto& v : b.values) {
      if (v.first < lowest.first) lowest = v;
      if (v.first > highest.first) highest = v;
      sum += v.first;
    }
    const auto& slow = field.slow == SlowEnd::Low ? lowest : highest;
    SpreadPoint p = b.point;
    p.min = lowest.first;
    p.max = highest.first;
    p.mean = sum / static_cast<double>(b.values.size());
    p.slow_rank = slow.second;
    p.slow = slow.first;
    points.push_back(p);
  }
  return points;
}

// The buckets spread_series promises over the wide steps of `rows` in [lo, hi]: narrower than
// a block, `width` steps from the first wide step; otherwise whole blocks, as many a bucket as
// keep the count within max_points. {origin, width}, or nullopt without a wide step there.
std::optional<std::pair<int64_t, int64_t>> promised_buckets(const StoredRows& rows, int64_t lo, int64_t hi,
                                                            size_t max_points) {
  std::optional<int64_t> first, last;
  for (const auto& [step, ranks] : rows)
    if (step >= lo && step <= hi && ranks.size() > kSpreadAbove) {
      if (!first) first = step;
      last = step;
    }
  if (!first) return std::nullopt;
  const int64_t span = *last - *first, points = static_cast<int64_t>(max_points);
  const int64_t width = max_points == 0 || span < points ? 1 : span / points + 1;
  if (width < kStepsPerBlock) return std::pair{*first, width};
  const int64_t blocks = block_of(*last) - block_of(*first) + 1;
  return std::pair{first_step_of(block_of(*first)), (blocks + points - 1) / points * kStepsPerBlock};
}

std::string point_text(const SpreadPoint& p) {
  return fmt::format("step {} time {:.17g} ranks {} min {:.17g} mean {:.17g} max {:.17g} slow {:.17g} at rank {}",
                     p.step, p.time, p.ranks, p.min, p.mean, p.max, p.slow, p.slow_rank);
}

class SpreadTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    db_ = open_store(path(), Access::ReadWrite);
    db_->exec("INSERT INTO runs (id, name, created_at) VALUES (1, 'wide', 0)");
  }
  // One writer commit of the rows.
  void commit(std::vector<MetricRow> rows) {
    Transaction tx(*db_);
    Batch batch;
    batch.items.push_back(MetricBatch{std::move(rows), std::nullopt});
    write_batch(*db_, 1, batch, {}, 1.7e9);
    tx.commit();
  }
  int64_t count(const std::string& sql) { return db_->query_int(sql); }
  // The one point of the key's spread at `step`.
  SpreadPoint at(const std::string& key, int64_t step) {
    const auto points = spread_series(*db_, 1, key, step, step, 0);
    EXPECT_EQ(points.size(), 1u);
    return points.empty() ? SpreadPoint{} : points.front();
  }
  std::unique_ptr<Database> db_;
};

TEST_F(SpreadTest, AWideStepKeepsMinMeanMaxAndTheSlowRankOfEachPerRankField) {
  commit(ranks_of(7, 0, kWide));
  const SpreadPoint fwd = at("fwd_ms", 7);
  EXPECT_EQ(fwd.ranks, kWide);
  EXPECT_EQ(fwd.min, 1.0);
  EXPECT_EQ(fwd.max, 50.0);
  double sum = 0;
  for (int r = 0; r < kWide; ++r) sum += spread_row(7, r).fwd_ms;
  EXPECT_DOUBLE_EQ(fwd.mean, sum / kWide);
  EXPECT_EQ(fwd.slow_rank, 3);  // a time: the highest is the slow one
  EXPECT_EQ(fwd.slow, 50.0);
  const SpreadPoint rate = at("tokens_per_s", 7);
  EXPECT_EQ(rate.slow_rank, 6);  // a throughput: the lowest is
  EXPECT_EQ(rate.slow, 10.0);
  EXPECT_EQ(rate.max, 1000.0 * kWide);
  // A field no rank measured has no spread; one the same on every rank has none to ask for.
  EXPECT_TRUE(spread_series(*db_, 1, "opt_ms", 0, 100, 0).empty());
  EXPECT_NE(testing_util::error_of([&] { spread_series(*db_, 1, "loss", 0, 100, 0); }).find("not a per-rank metric"),
            std::string::npos);
}

TEST_F(SpreadTest, RanksInLaterCommitsMergeAndALoggedAgainStepIsRecomputed) {
  // Ranks 0-8 (already wide), then 9-11 in the next commit: merged.
  commit(ranks_of(5, 0, 9));
  commit(ranks_of(5, 9, 12));
  EXPECT_EQ(at("fwd_ms", 5).ranks, 12);
  EXPECT_EQ(at("fwd_ms", 5).max, 50.0);
  EXPECT_EQ(at("fwd_ms", 5).min, 1.0);
  EXPECT_DOUBLE_EQ(at("fwd_ms", 5).mean, (50.0 + 11 * 1.0 + 0.5 * (66 - 3)) / 12);
  // A narrow first part (5 ranks), the rest later: counted from the rows.
  commit(ranks_of(6, 0, 5));
  EXPECT_EQ(count("SELECT count(*) FROM metric_spread WHERE step = 6"), 0);
  commit(ranks_of(6, 5, kWide));
  EXPECT_EQ(at("fwd_ms", 6).ranks, kWide);
  EXPECT_EQ(at("fwd_ms", 6).slow_rank, 3);
  // A resumed run logs step 5 again, every time halved: the old extremes are gone.
  commit(ranks_of(5, 0, 12, 0.5));
  EXPECT_EQ(at("fwd_ms", 5).ranks, 12);
  EXPECT_EQ(at("fwd_ms", 5).max, 25.0);
  EXPECT_EQ(at("fwd_ms", 5).min, 0.5);
}

TEST_F(SpreadTest, AFewRanksKeepEveryRowAndNoSpread) {
  for (int64_t step = 0; step < 3; ++step) commit(ranks_of(step, 0, static_cast<int>(kSpreadAbove)));
  EXPECT_EQ(count("SELECT count(*) FROM metric_spread"), 0);
  EXPECT_FALSE(has_spread(*db_, 1));
  EXPECT_EQ(count("SELECT count(*) FROM metrics"), 3 * static_cast<int64_t>(kSpreadAbove));
}

// What the live stream sends: each step by its own rank count, a narrow one's every row, a
// wide one's rank 0 row.
TEST_F(SpreadTest, BesideTheSpreadAreNarrowStepsRowsAndWideStepsRankZero) {
  commit(ranks_of(1, 0, 2));
  commit(ranks_of(2, 0, kWide));
  commit(ranks_of(3, 0, 2));
  commit(ranks_of(4, 0, kWide));
  std::vector<std::pair<int64_t, int>> rows;
  const auto visit = [&](const MetricRow& row) { rows.emplace_back(row.step, row.rank); };
  EXPECT_EQ(for_each_row_beside_spread(*db_, 1, visit, 1, std::numeric_limits<int64_t>::max()), 2u);
  EXPECT_EQ(rows, (std::vector<std::pair<int64_t, int>>{{1, 0}, {1, 1}, {2, 0}, {3, 0}, {3, 1}, {4, 0}}));
  rows.clear();
  EXPECT_EQ(for_each_row_beside_spread(*db_, 1, visit, 2, 3), 1u);
  EXPECT_EQ(rows, (std::vector<std::pair<int64_t, int>>{{2, 0}, {3, 0}, {3, 1}}));
}

TEST_F(SpreadTest, TheDetailsOfAWideLatestStepHoldRankZerosRowAndTheRankCount) {
  commit(ranks_of(1, 0, 2));
  EXPECT_EQ(run_details(*db_, 1).latest.size(), 2u);
  EXPECT_EQ(run_details(*db_, 1).latest_ranks, 2);
  commit(ranks_of(2, 0, kWide));
  const RunDetails d = run_details(*db_, 1);
  ASSERT_EQ(d.latest.size(), 1u);
  EXPECT_EQ(d.latest[0].step, 2);
  EXPECT_EQ(d.latest[0].rank, 0);
  EXPECT_EQ(d.latest_ranks, kWide);
  const std::vector<MetricRow> every = latest_rows_of_every_rank(*db_, 1);
  ASSERT_EQ(every.size(), static_cast<size_t>(kWide));
  EXPECT_EQ(every.back().rank, kWide - 1);
}

TEST_F(SpreadTest, OldRowsOfRanksOtherThanZeroGoAndTheirBlocksStay) {
  const int64_t steps = kRecentSteps + 70;
  for (int64_t step = 0; step < steps; step += 10) {
    std::vector<MetricRow> rows;
    for (int64_t s = step; s < std::min(step + 10, steps); ++s)
      for (const MetricRow& r : ranks_of(s, 0, kWide)) rows.push_back(r);
    commit(rows);
  }
  const auto window = pruned_before(*db_, 1);
  ASSERT_TRUE(window);
  EXPECT_EQ(*window, 70);
  EXPECT_EQ(count("SELECT count(*) FROM metrics WHERE rank <> 0 AND step < 70"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM metrics WHERE rank <> 0"), kRecentSteps * (kWide - 1));
  EXPECT_EQ(count("SELECT count(*) FROM metrics WHERE rank = 0"), steps);
  EXPECT_EQ(count("SELECT count(*) FROM metric_spread"), steps);
  // Rank 3's blocks still hold its old extremes: a zoom into the pruned steps 10-20 reads
  // block 0 (steps 0-63) whole, one point.
  SeriesQuery q;
  q.key = "fwd_ms";
  q.ranks = {3};
  q.first_step = 10;
  q.last_step = 20;
  q.max_points = 1000;
  auto old = metric_series(*db_, 1, q);
  ASSERT_EQ(old.size(), 1u);
  ASSERT_EQ(old[0].points.size(), 1u);
  EXPECT_EQ(old[0].points[0].step, 63);
  EXPECT_EQ(old[0].points[0].max, 50.0);
  // The whole run: blocks before the window's block, then rows, every step of rank 3 covered.
  q.first_step = std::numeric_limits<int64_t>::min();
  q.last_step = std::numeric_limits<int64_t>::max();
  auto whole = metric_series(*db_, 1, q);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].points.front().step, 63);
  EXPECT_EQ(whole[0].points.back().step, steps - 1);
  // A resumed run logging old step 5 again: its new rows go at once, the spread stays.
  commit(ranks_of(5, 0, kWide, 2));
  EXPECT_EQ(count("SELECT count(*) FROM metrics WHERE step = 5"), 1);
  EXPECT_EQ(at("fwd_ms", 5).max, 100.0);
  // The heat strip reads the steps that still have every rank.
  HeatQuery heat_query;
  heat_query.max_columns = 3;
  const RankHeat heat = rank_heat(*db_, 1, heat_query);
  ASSERT_FALSE(heat.steps.empty());
  EXPECT_EQ(heat.steps.front(), 70);
  EXPECT_EQ(heat.ranks.size(), static_cast<size_t>(kWide));
}

TEST_F(SpreadTest, ASpreadSeriesBucketsStepsAndKeepsTheSlowestOfEach) {
  for (int64_t step = 0; step < 20; ++step) commit(ranks_of(step, 0, kWide, step == 13 ? 4 : 1));
  const auto points = spread_series(*db_, 1, "fwd_ms", 0, 100, 4);
  ASSERT_EQ(points.size(), 4u);  // 19 steps in buckets of 5
  EXPECT_EQ(points[2].step, 14);
  EXPECT_EQ(points[2].max, 200.0);
  EXPECT_EQ(points[2].slow_rank, 3);
  EXPECT_EQ(points[1].max, 50.0);
  EXPECT_EQ(points[3].step, 19);
}

TEST_F(SpreadTest, BucketsOfWholeBlocksMergeInStepOrderAndATieKeepsTheEarlierStepsRank) {
  // Block 0: step 3's max 9 at ranks 2 and 3 (the lower, 2), step 7's 9 at ranks 0 and 9 later.
  commit(fwd_step(3, {4, 2, 9, 9, 5, 6, 7, 8, 3, 2}));
  commit(fwd_step(7, {9, 1, 3, 3, 3, 3, 3, 3, 3, 9}));
  // Block 1: 9 at rank 0 once more. Block 2: 9 at rank 9, then a step that measured no fwd_ms.
  commit(fwd_step(64, {9, 5, 5, 5, 5, 5, 5, 5, 5}));
  commit(fwd_step(130, {1, 1, 1, 1, 1, 1, 1, 1, 1, 9}));
  commit(fwd_step(140, std::vector<double>(10, kNoValue)));
  // Steps 3-140 in 2 points: 69 steps a bucket, so buckets of whole blocks, two a bucket.
  std::vector<SpreadPoint> points = spread_series(*db_, 1, "fwd_ms", 0, 200, 2);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].step, 64);
  EXPECT_EQ(points[0].time, 1e9 + 64);
  EXPECT_EQ(points[0].ranks, 9);
  EXPECT_EQ(points[0].min, 1.0);
  EXPECT_EQ(points[0].max, 9.0);
  EXPECT_EQ(points[0].slow_rank, 2);  // step 3's: the earliest step at the max
  EXPECT_EQ(points[0].slow, 9.0);
  EXPECT_EQ(points[0].mean, (55.0 + 40.0 + 49.0) / 29);
  // The second bucket's point is at its last wide step, 140, with step 130's values.
  EXPECT_EQ(points[1].step, 140);
  EXPECT_EQ(points[1].ranks, 10);
  EXPECT_EQ(points[1].slow_rank, 9);
  EXPECT_EQ(points[1].mean, 18.0 / 10);
  // One point: block 2's 9 at rank 9 comes after step 3's.
  points = spread_series(*db_, 1, "fwd_ms", 0, 200, 1);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].slow_rank, 2);
  EXPECT_EQ(points[0].mean, (55.0 + 40.0 + 49.0 + 18.0) / 39);
  // A range from step 5 cuts block 0: its steps in range come from their rows, so step 7's
  // rank 0 is the first at the max.
  points = spread_series(*db_, 1, "fwd_ms", 5, 200, 1);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].slow_rank, 0);
  EXPECT_EQ(points[0].min, 1.0);
  EXPECT_EQ(points[0].mean, (40.0 + 49.0 + 18.0) / 29);
  // A point a step: the rows, and no point for the step without a value.
  points = spread_series(*db_, 1, "fwd_ms", 0, 200, 0);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[1].slow_rank, 0);
  EXPECT_EQ(points[3].step, 130);
  // 100 points are narrow buckets, read from the rows while steps 3-140 (138 rows) are within
  // max_rows; past it, a point a whole block.
  EXPECT_EQ(spread_series(*db_, 1, "fwd_ms", 0, 200, 100, 138).size(), 4u);
  points = spread_series(*db_, 1, "fwd_ms", 0, 200, 100, 137);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].step, 7);
  EXPECT_EQ(points[0].slow_rank, 2);
  EXPECT_EQ(points[1].step, 64);
  EXPECT_EQ(points[2].step, 140);
  EXPECT_EQ(points[2].mean, 18.0 / 10);
}

TEST_F(SpreadTest, BucketsOfWholeBlocksAnswerWhatAWalkOfTheRowsAnswers) {
  std::mt19937 random(20261129);
  const auto draw = [&](int n) { return static_cast<int>(random() % static_cast<uint32_t>(n)); };
  // Values on a quarter grid: sums exact in any order, and many ties.
  const auto value = [&] { return draw(6) == 0 ? kNoValue : 0.25 * draw(24); };
  StoredRows stored;
  std::vector<MetricRow> batch, late;
  // A step's rows: 9 to 12 ranks (now and then 5: a narrow step with no spread), fwd_ms
  // sometimes measured by none; now and then its higher ranks come a commit late.
  const auto log_step = [&](int64_t step, double time) {
    const int ranks = draw(6) == 0 ? 5 : 9 + draw(4);
    const bool measured = draw(12) != 0;
    const int on_time = draw(8) == 0 ? 1 + draw(ranks - 1) : ranks;
    for (int r = 0; r < ranks; ++r) {
      MetricRow row;
      row.step = step;
      row.rank = r;
      row.time = time + 0.25 * draw(4);
      row.fwd_ms = measured ? value() : kNoValue;
      row.tokens_per_s = value();
      stored[step][r] = row;
      (r < on_time ? batch : late).push_back(row);
    }
    if (draw(4) == 0) {
      commit(std::exchange(batch, std::exchange(late, {})));
    }
  };
  const auto flush = [&] {
    commit(std::exchange(batch, {}));
    commit(std::exchange(late, {}));
  };
  // Every few ranges at every few point counts, for both ends of the slow rank: the points
  // spread_series gives, and those of the walk of the rows.
  const auto expect_walk_of_rows = [&] {
    ASSERT_LT(stored.size(), static_cast<size_t>(kRecentSteps));  // every row kept: the walk sees them all
    const int64_t top = stored.rbegin()->first;
    std::vector<std::pair<int64_t, int64_t>> ranges = {
        {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}};
    for (int i = 0; i < 12; ++i) {
      const int64_t lo = draw(static_cast<int>(top) + 10) - 5;
      ranges.emplace_back(lo, lo + draw(static_cast<int>(top - lo) + 10));
    }
    int from_blocks = 0;
    for (const char* key : {"fwd_ms", "tokens_per_s"})
      for (const auto& [lo, hi] : ranges)
        for (const size_t max_points : {0, 1, 2, 3, 5, 8, 13, 1000}) {
          const std::string asked = fmt::format("{} in [{}, {}] at {} points", key, lo, hi, max_points);
          const std::vector<SpreadPoint> got = spread_series(*db_, 1, key, lo, hi, max_points);
          const auto buckets = promised_buckets(stored, lo, hi, max_points);
          if (!buckets) {
            EXPECT_TRUE(got.empty()) << asked;
            continue;
          }
          if (buckets->second >= kStepsPerBlock) ++from_blocks;
          const std::vector<SpreadPoint> walked =
              walk_of_rows(stored, *find_metric_field(key), lo, hi, buckets->first, buckets->second);
          ASSERT_EQ(got.size(), walked.size()) << asked;
          for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(point_text(got[i]), point_text(walked[i])) << asked;
        }
    EXPECT_GT(from_blocks, 40);
  };
  for (int64_t n = 0, step = 0; n < 300; ++n, step += 1 + draw(6)) log_step(step, 1e9 + static_cast<double>(step));
  flush();
  expect_walk_of_rows();
  // A resumed run logs 50 of those steps again, replacing rows (and with fewer ranks, not all).
  auto again = std::next(stored.begin(), 100);
  std::vector<int64_t> resumed;
  for (int i = 0; i < 50; ++i, ++again) resumed.push_back(again->first);
  for (const int64_t step : resumed) log_step(step, 2e9 + static_cast<double>(step));
  flush();
  expect_walk_of_rows();
  // A rewind forgets the steps past a wide one about the 250th step whose block holds a
  // later wide step, and the run goes on from there.
  const auto wide_after = [&](StoredRows::const_iterator at) {
    do ++at;
    while (at->second.size() <= kSpreadAbove);
    return at;
  };
  auto kept = std::next(stored.cbegin(), 250);
  while (kept->second.size() <= kSpreadAbove || block_of(wide_after(kept)->first) != block_of(kept->first)) ++kept;
  const int64_t to_step = kept->first;
  Rewind back;
  back.number = 1;
  back.spike_step = to_step + 1;
  back.from_step = stored.rbegin()->first;
  back.to_step = to_step;
  back.first_skipped_batch = to_step + 1;
  {
    Transaction tx(*db_);
    insert_rewind(*db_, 1, back);
    tx.commit();
  }
  stored.erase(stored.upper_bound(to_step), stored.end());
  expect_walk_of_rows();
  for (int64_t step = to_step + 1; step < to_step + 120; step += 1 + draw(3)) log_step(step, 3e9 + static_cast<double>(step));
  flush();
  expect_walk_of_rows();
}

}  // namespace
}  // namespace kiln::store
