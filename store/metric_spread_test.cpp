// The spread of a wide step across ranks, as the writer keeps it commit after commit, and the
// recent-only rows of ranks other than 0 it makes affordable.
#include "store/metric_spread.h"

#include <gtest/gtest.h>

#include <limits>

#include "store/batch_rows.h"
#include "store/metric_blocks.h"
#include "store/metric_fields.h"
#include "store/metric_queries.h"
#include "store/rank_queries.h"
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

}  // namespace
}  // namespace kiln::store
