#include "store/rank_queries.h"

#include <gtest/gtest.h>

#include <cmath>

#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::run_info;
using testing_util::StoreTest;
using testing_util::error_of;

class RankQueriesTest : public StoreTest {};

// Rank r's row at `step`: 10 ms forward, 20 backward, 2 optimizer; the slow rank works twice
// as long and the others wait for it in exposed communication, so their steps match.
MetricRow row_of(int64_t step, int rank, int slow_rank) {
  MetricRow m;
  m.step = step;
  m.rank = rank;
  m.time = 1.7e9 + static_cast<double>(step);
  const double scale = rank == slow_rank ? 2 : 1;
  m.fwd_ms = 10 * scale;
  m.bwd_ms = 20 * scale;
  m.opt_ms = 2 * scale;
  m.comm_ms = rank == slow_rank ? 1 : 33;
  m.data_ms = 0.5;
  m.mem_used = int64_t{100 + rank} << 20;
  m.tokens_per_s = 5000;
  return m;
}

// A run of `ranks` ranks logging steps 1..steps, `slow_rank` slow from `slow_from` on.
int64_t write_run(const std::string& path, const std::string& name, int ranks, int64_t steps, int slow_rank,
                  int64_t slow_from, bool places) {
  RunWriter writer(path);
  const int64_t id = writer.create_run(run_info(name));
  if (places) {
    std::vector<RankPlace> where;
    for (int r = 0; r < ranks; ++r) where.push_back({r, "node" + std::to_string(r / 2), "cpu", 1000 + r});
    writer.record_ranks(where);
  }
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<MetricRow> rows;
    for (int r = 0; r < ranks; ++r) rows.push_back(row_of(step, r, step >= slow_from ? slow_rank : -1));
    writer.log_metrics(rows);
  }
  writer.finish(RunStatus::Completed);
  writer.flush();
  return id;
}

TEST(RankFigures, StepAndWorkingTimesMedianAndSlowest) {
  const MetricRow slow = row_of(1, 2, 2), fast = row_of(1, 0, 2);
  EXPECT_DOUBLE_EQ(step_ms(slow), 20 + 40 + 4 + 1 + 0.5);
  EXPECT_DOUBLE_EQ(working_ms(slow), 64);
  EXPECT_DOUBLE_EQ(working_ms(fast), 32);
  EXPECT_TRUE(std::isnan(step_ms(MetricRow{})));
  EXPECT_DOUBLE_EQ(median_of({3, kNoValue, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(median_of({kNoValue})));
  const std::vector<MetricRow> rows = {row_of(1, 0, 2), row_of(1, 1, 2), row_of(1, 2, 2), row_of(1, 3, 2)};
  EXPECT_EQ(slowest_of(rows), 2u);
  const std::vector<MetricRow> even = {row_of(1, 0, -1), row_of(1, 1, -1)};
  EXPECT_FALSE(slowest_of(even).has_value()) << "equal ranks have no slowest";
  EXPECT_FALSE(slowest_of(std::span(rows).first(1)).has_value()) << "one rank has no slowest";
}

TEST_F(RankQueriesTest, RanksNowJoinsPlacesAndTheLatestStep) {
  const int64_t id = write_run(path(), "four", 4, 6, 2, 1, true);
  const int64_t bare = write_run(path(), "bare", 2, 3, 1, 1, false);
  auto db = open_store(path(), Access::ReadOnly);
  const RanksNow now = ranks_now(*db, id);
  EXPECT_EQ(now.step, 6);
  EXPECT_EQ(now.slowest, 2);
  EXPECT_DOUBLE_EQ(now.median_working_ms, 32);
  ASSERT_EQ(now.ranks.size(), 4u);
  EXPECT_EQ(now.ranks[3].rank, 3);
  EXPECT_EQ(now.ranks[3].host, "node1");
  EXPECT_EQ(now.ranks[3].device, "cpu");
  EXPECT_EQ(now.ranks[3].pid, 1003);
  ASSERT_TRUE(now.ranks[2].latest.has_value());
  EXPECT_EQ(now.ranks[2].latest->step, 6);
  EXPECT_DOUBLE_EQ(now.ranks[2].latest->fwd_ms, 20);
  EXPECT_EQ(now.ranks[2].latest->mem_used, int64_t{102} << 20);

  const RanksNow old = ranks_now(*db, bare);
  ASSERT_EQ(old.ranks.size(), 2u) << "a run without places still has its ranks";
  EXPECT_EQ(old.ranks[1].host, "");
  EXPECT_EQ(old.slowest, 1);
  EXPECT_NE(error_of([&] { ranks_now(*db, 999); }).find("999"), std::string::npos);
}

TEST_F(RankQueriesTest, HeatStripHoldsEachRanksTimeAgainstTheMedian) {
  // Rank 1 turns slow at step 5 of 8.
  const int64_t id = write_run(path(), "heat", 4, 8, 1, 5, true);
  auto db = open_store(path(), Access::ReadOnly);
  const RankHeat heat = rank_heat(*db, id, HeatQuery{});
  EXPECT_EQ(heat.steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(heat.group, 1);
  EXPECT_EQ(heat.ranks, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(heat.relative.size(), 4u);
  EXPECT_DOUBLE_EQ(heat.relative[1][3], 1.0);
  EXPECT_DOUBLE_EQ(heat.relative[1][4], 2.0);
  EXPECT_DOUBLE_EQ(heat.relative[0][4], 1.0);
  EXPECT_DOUBLE_EQ(heat.step_ms[1][4], 64 + 1 + 0.5);
  EXPECT_DOUBLE_EQ(heat.step_ms[0][4], 32 + 33 + 0.5);

  // Three columns of eight steps: both ends and the middle.
  HeatQuery sampled;
  sampled.max_columns = 3;
  EXPECT_EQ(rank_heat(*db, id, sampled).steps, (std::vector<int64_t>{1, 4, 8}));
  HeatQuery range;
  range.from = 6;
  range.to = 7;
  EXPECT_EQ(rank_heat(*db, id, range).steps, (std::vector<int64_t>{6, 7}));

  // Two rows for four ranks: the row of ranks 0-1 shows rank 1, its slowest.
  HeatQuery folded;
  folded.max_rows = 2;
  const RankHeat two = rank_heat(*db, id, folded);
  EXPECT_EQ(two.group, 2);
  EXPECT_EQ(two.ranks, (std::vector<int>{0, 2}));
  EXPECT_DOUBLE_EQ(two.relative[0][7], 2.0);
  EXPECT_DOUBLE_EQ(two.relative[1][7], 1.0);

  range.from = 100;
  range.to = 200;
  EXPECT_TRUE(rank_heat(*db, id, range).steps.empty());

  EXPECT_EQ(recent_from(*db, id, 3), 6) << "steps 6, 7 and 8";
  EXPECT_EQ(recent_from(*db, id, 100), 1);
  EXPECT_FALSE(recent_from(*db, 999, 3).has_value());
}

}  // namespace
}  // namespace kiln::store
