#include "store/metric_queries.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/check.h"
#include "store/config_diff.h"
#include "store/export.h"
#include "store/metric_blocks.h"
#include "store/rows.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;

using testing_util::StoreTest;

// A value with structure: a slow decay, a wiggle, and one spike at step 5003.
double value_at(int64_t step, int rank) {
  if (step == 5003 && rank == 0) return 100.0;
  return 5.0 / (1.0 + 0.001 * static_cast<double>(step)) + 0.01 * static_cast<double>((step * 7) % 5) + rank;
}

class MetricQueriesTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    db_ = open_store(path(), Access::ReadWrite);
    db_->exec("INSERT INTO runs (name, created_at, started_at) VALUES ('series', 0, 1000)");
    run_ = db_->last_insert_rowid();
    Transaction tx(*db_);
    BlockUpdate blocks;
    for (int64_t step = 0; step < 10000; ++step) {
      std::vector<MetricRow> rows;
      for (int rank = 0; rank < 2; ++rank) {
        MetricRow m;
        m.step = step;
        m.rank = rank;
        m.time = 1000.0 + static_cast<double>(step);
        m.tokens = step * 100;
        m.loss = value_at(step, rank);
        if (step % 2 == 0) m.grad_norm = static_cast<double>(step);  // only even steps
        insert_metric(*db_, run_, m);
        rows.push_back(m);
      }
      blocks.add(rows);
    }
    blocks.write(*db_, run_);
    tx.commit();
  }

  std::unique_ptr<Database> db_;
  int64_t run_ = 0;
};

TEST_F(MetricQueriesTest, EveryPointWithoutDownsampling) {
  SeriesQuery q;
  q.key = "loss";
  q.first_step = 100;
  q.last_step = 199;
  const auto series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(series[rank].rank, rank);
    ASSERT_EQ(series[rank].points.size(), 100u);
    for (size_t i = 0; i < 100; ++i) {
      const auto& p = series[rank].points[i];
      const int64_t step = 100 + static_cast<int64_t>(i);
      EXPECT_EQ(p.step, step);
      EXPECT_EQ(p.time, 1000.0 + static_cast<double>(step));
      EXPECT_EQ(p.value, value_at(step, rank));
      EXPECT_EQ(p.min, p.value);
      EXPECT_EQ(p.max, p.value);
    }
  }
}

// A client asking for one rank set after another (the dashboard's ranks= parameter) reuses
// one prepared statement: the connection's statement cache does not grow with the sets.
TEST_F(MetricQueriesTest, RankSetsAreBoundNotWrittenIntoTheSql) {
  SeriesQuery q;
  q.first_step = 0;
  q.last_step = 9;
  q.ranks = {1};
  ASSERT_EQ(metric_series(*db_, run_, q).size(), 1u);
  const size_t statements = db_->cached_count();
  for (int n = 2; n < 300; ++n) {
    q.ranks = {1, n};
    const auto series = metric_series(*db_, run_, q);
    ASSERT_EQ(series.size(), 1u);
    EXPECT_EQ(series[0].rank, 1);
    EXPECT_EQ(series[0].points.size(), 10u);
  }
  EXPECT_EQ(db_->cached_count(), statements);
}

TEST_F(MetricQueriesTest, TheStatementCacheIsBounded) {
  for (int n = 0; n < 1000; ++n) db_->cached("SELECT " + std::to_string(n)).step();
  EXPECT_EQ(db_->cached_count(), Database::kMaxCachedStatements);
  // The most recently used statements stay.
  Statement& last = db_->cached("SELECT 999");
  ASSERT_TRUE(last.step());
  EXPECT_EQ(last.int64(0), 999);
  EXPECT_EQ(db_->cached_count(), Database::kMaxCachedStatements);
}

// The extremes and the last row of rank 0 over steps first..last.
SeriesPoint expected_point(int64_t first, int64_t last) {
  SeriesPoint p{last, 1000.0 + static_cast<double>(last), value_at(last, 0), INFINITY, -INFINITY};
  for (int64_t s = first; s <= last; ++s) {
    p.min = std::min(p.min, value_at(s, 0));
    p.max = std::max(p.max, value_at(s, 0));
  }
  return p;
}

TEST_F(MetricQueriesTest, DownsamplingKeepsMinMaxAndLastPerBucket) {
  SeriesQuery q;
  q.key = "loss";
  q.ranks = {0};
  q.max_points = 100;
  const auto series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 1u);
  const auto& points = series[0].points;
  // 10,000 steps in at most 100 buckets need 100 steps each: wider than a block, so each
  // bucket is two whole blocks of 64 steps, 79 buckets from step 0 (the last one shorter).
  ASSERT_EQ(points.size(), 79u);
  for (size_t b = 0; b < points.size(); ++b) {
    const int64_t first = static_cast<int64_t>(b) * 128;
    const SeriesPoint want = expected_point(first, std::min<int64_t>(first + 127, 9999));
    EXPECT_EQ(points[b].step, want.step);
    EXPECT_EQ(points[b].time, want.time);
    EXPECT_EQ(points[b].value, want.value);
    EXPECT_EQ(points[b].min, want.min);
    EXPECT_EQ(points[b].max, want.max);
  }
  EXPECT_EQ(points[39].max, 100.0);  // the spike at step 5003 survives
}

TEST_F(MetricQueriesTest, BucketsNarrowerThanABlockStartAtTheFirstStep) {
  SeriesQuery q;
  q.key = "loss";
  q.ranks = {0};
  q.first_step = 4003;
  q.last_step = 6002;
  q.max_points = 100;
  const auto series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 1u);
  const auto& points = series[0].points;
  ASSERT_EQ(points.size(), 100u);  // 2000 steps in buckets of 20 from step 4003
  for (size_t b = 0; b < points.size(); ++b) {
    const int64_t first = 4003 + static_cast<int64_t>(b) * 20;
    const SeriesPoint want = expected_point(first, first + 19);
    EXPECT_EQ(points[b].step, want.step);
    EXPECT_EQ(points[b].value, want.value);
    EXPECT_EQ(points[b].min, want.min);
    EXPECT_EQ(points[b].max, want.max);
  }
  EXPECT_EQ(points[50].max, 100.0);  // steps 5003..5022
}

// Narrow buckets over more rows than max_rows: a point a block instead, the cut blocks from
// their rows in the range.
TEST_F(MetricQueriesTest, PastItsRowsASeriesReadsBlocks) {
  SeriesQuery q;
  q.key = "loss";
  q.ranks = {0, 1};
  q.first_step = 4003;
  q.last_step = 6002;
  q.max_points = 100;
  q.max_rows = 4000;  // 2000 steps of 2 ranks: rows, as above
  ASSERT_EQ(metric_series(*db_, run_, q)[0].points.size(), 100u);
  q.max_rows = 3999;
  const auto series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 2u);
  const auto& points = series[0].points;
  ASSERT_EQ(points.size(), 32u);  // blocks 62 (steps 3968..4031) to 93 (5952..6015)
  for (size_t i = 0; i < points.size(); ++i) {
    const int64_t block = 62 + static_cast<int64_t>(i);
    const SeriesPoint want = expected_point(std::max<int64_t>(4003, block * 64), std::min<int64_t>(6002, block * 64 + 63));
    EXPECT_EQ(points[i].step, want.step);
    EXPECT_EQ(points[i].value, want.value);
    EXPECT_EQ(points[i].min, want.min);
    EXPECT_EQ(points[i].max, want.max);
  }
  EXPECT_EQ(points[16].max, 100.0);  // block 78 holds the spike at 5003
  EXPECT_EQ(series[1].points.size(), 32u);
}

TEST_F(MetricQueriesTest, PastItsBlocksASeriesReadsSuperblocks) {
  SeriesQuery q;
  q.key = "loss";
  q.ranks = {0, 1};
  q.first_step = 1000;
  q.last_step = 9500;
  q.max_points = 100;
  q.max_rows = 268;  // blocks 15 (steps 960..1023) to 148 (9472..9535) of 2 ranks: blocks
  ASSERT_EQ(metric_series(*db_, run_, q)[0].points.size(), 67u);  // two blocks a point
  q.max_rows = 267;
  const auto series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 2u);
  // Superblocks 0 (steps ..4095, cut by the range: its blocks, and block 15's rows), 1 (whole)
  // and 2 (8192.., cut: its blocks to 147 and block 148's rows to 9500).
  const auto& points = series[0].points;
  ASSERT_EQ(points.size(), 3u);
  const int64_t edges[] = {1000, 4096, 8192, 9501};
  for (size_t i = 0; i < points.size(); ++i) {
    const SeriesPoint want = expected_point(edges[i], edges[i + 1] - 1);
    EXPECT_EQ(points[i].step, want.step);
    EXPECT_EQ(points[i].time, want.time);
    EXPECT_EQ(points[i].value, want.value);
    EXPECT_EQ(points[i].min, want.min);
    EXPECT_EQ(points[i].max, want.max);
  }
  EXPECT_EQ(points[1].max, 100.0);  // the spike at 5003
  EXPECT_EQ(series[1].points.size(), 3u);
  EXPECT_EQ(series[1].points[2].value, value_at(9500, 1));

  // Buckets of 64 blocks or more are superblocks whatever the bound: 10,000 steps at two
  // points, two superblocks a point.
  q = SeriesQuery{};
  q.ranks = {0};
  q.max_points = 2;
  const auto wide = metric_series(*db_, run_, q);
  ASSERT_EQ(wide.size(), 1u);
  ASSERT_EQ(wide[0].points.size(), 2u);
  EXPECT_EQ(wide[0].points[0].step, 8191);
  EXPECT_EQ(wide[0].points[0].max, 100.0);
  EXPECT_EQ(wide[0].points[0].min, expected_point(0, 8191).min);
  EXPECT_EQ(wide[0].points[1].step, 9999);
  EXPECT_EQ(wide[0].points[1].min, expected_point(8192, 9999).min);
}

TEST_F(MetricQueriesTest, ARangeThatCutsBlocksCountsOnlyItsOwnSteps) {
  SeriesQuery q;
  q.key = "loss";
  q.ranks = {0};
  q.max_points = 10;
  // Blocks 78 (steps 4992..5055) and 93 (5952..6015) are cut; the spike at 5003 lies in
  // block 78 before the range, and must not reach the first bucket's max.
  q.first_step = 5004;
  q.last_step = 6000;
  auto series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 1u);
  // 997 steps, 10 points: buckets of 128 steps (two blocks) from block 78.
  ASSERT_EQ(series[0].points.size(), 8u);
  const SeriesPoint want_first = expected_point(5004, 5119);
  EXPECT_EQ(series[0].points[0].max, want_first.max);
  EXPECT_LT(series[0].points[0].max, 100.0);
  EXPECT_EQ(series[0].points[0].min, want_first.min);
  EXPECT_EQ(series[0].points[0].step, 5119);
  const SeriesPoint want_last = expected_point(5888, 6000);
  EXPECT_EQ(series[0].points[7].step, 6000);
  EXPECT_EQ(series[0].points[7].value, value_at(6000, 0));
  EXPECT_EQ(series[0].points[7].min, want_last.min);
  EXPECT_EQ(series[0].points[7].max, want_last.max);
  // One step earlier, the spike is in.
  q.first_step = 5003;
  series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].points[0].max, 100.0);
}

// A range's cut block is read from the rows of the wanted ranks alone (a seek per step and
// rank): rank 0 of a 4,096-rank run read every rank's rows of the cut block, 30 ms a key.
TEST_F(MetricQueriesTest, ACutBlockReadsTheWantedRanksAlone) {
  const size_t loss = key_index("loss");
  const std::vector<int> one{1};
  auto found = aggregate_key_rows(*db_, run_, loss, one, 4990, 5010);
  ASSERT_EQ(found.size(), 1u);
  const KeyAggregate& a = found.at(1);
  EXPECT_EQ(a.last_step, 5010);
  EXPECT_EQ(a.last, value_at(5010, 1));
  double low = INFINITY, high = -INFINITY;
  for (int64_t s = 4990; s <= 5010; ++s) {
    low = std::min(low, value_at(s, 1));
    high = std::max(high, value_at(s, 1));
  }
  EXPECT_EQ(a.min, low);
  EXPECT_EQ(a.max, high);
  EXPECT_LT(a.max, 100.0);  // rank 0's spike at 5003 is not rank 1's
  // Every rank; and a rank with no rows is left out.
  EXPECT_EQ(aggregate_key_rows(*db_, run_, loss, {}, 4990, 5010).size(), 2u);
  const std::vector<int> absent{0, 7};
  found = aggregate_key_rows(*db_, run_, loss, absent, 5003, 5003);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found.at(0).max, 100.0);
  // The series of rank 1 over a range cutting blocks 77 and 78 agrees.
  SeriesQuery q;
  q.key = "loss";
  q.ranks = one;
  q.first_step = 4990;
  q.last_step = 5010;
  q.max_points = 1;
  q.max_rows = 1;  // from the blocks, both cut
  const auto series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 1u);
  ASSERT_EQ(series[0].points.size(), 1u);
  EXPECT_EQ(series[0].points[0].min, low);
  EXPECT_EQ(series[0].points[0].max, high);
}

TEST_F(MetricQueriesTest, NullValuesAreSkippedAndKeysChecked) {
  SeriesQuery q;
  q.key = "grad_norm";
  q.ranks = {1};
  q.first_step = 0;
  q.last_step = 9;
  const auto series = metric_series(*db_, run_, q);
  ASSERT_EQ(series.size(), 1u);
  std::vector<int64_t> steps;
  for (const auto& p : series[0].points) steps.push_back(p.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 2, 4, 6, 8}));
  q.ranks = {5};
  EXPECT_TRUE(metric_series(*db_, run_, q).empty());
  q.key = "loss; DROP TABLE runs";
  const std::string message = error_of([&] { metric_series(*db_, run_, q); });
  EXPECT_EQ(message.rfind("store: unknown metric 'loss; DROP TABLE runs' (valid: loss, lr, ", 0), 0u)
      << message;
  q.key = "loss";
  EXPECT_EQ(error_of([&] { metric_series(*db_, 42, q); }), "store: no run with id 42 in " + path());
}

TEST_F(MetricQueriesTest, SummaryFigures) {
  db_->exec("INSERT INTO runs (name, created_at, started_at) VALUES ('small', 0, 50)");
  const int64_t run = db_->last_insert_rowid();
  // Steps 1..4 on two ranks; per-step mean loss 4, 3, 1.5, 2; tokens/s and MFU per step.
  const double loss[4][2] = {{4.5, 3.5}, {3, 3}, {1, 2}, {2, 2}};
  for (int64_t step = 1; step <= 4; ++step)
    for (int rank = 0; rank < 2; ++rank) {
      MetricRow m;
      m.step = step;
      m.rank = rank;
      m.time = 100.0 + 10.0 * static_cast<double>(step);
      m.loss = loss[step - 1][rank];
      m.tokens_per_s = 1000.0 * static_cast<double>(step);
      m.mfu = 0.1 * static_cast<double>(step);
      insert_metric(*db_, run, m);
    }
  insert_valid(*db_, run, {2, 0, 3.5});
  insert_valid(*db_, run, {4, 0, 2.25});
  const RunSummary s = summarize_run(*db_, run, 3.0);
  EXPECT_EQ(s.name, "small");
  EXPECT_EQ(s.logged_steps, 4);
  EXPECT_EQ(s.last_step, 4);
  EXPECT_EQ(s.final_loss, 2.0);
  EXPECT_EQ(s.best_loss, 1.5);
  EXPECT_EQ(s.best_step, 3);
  EXPECT_EQ(s.best_valid_loss, 2.25);
  EXPECT_DOUBLE_EQ(s.mean_tokens_per_s, 3000.0);  // steps 2..4
  EXPECT_DOUBLE_EQ(s.mean_mfu, 0.3);
  EXPECT_TRUE(std::isnan(s.mean_tflops));
  EXPECT_EQ(s.elapsed_s, 140.0 - 50.0);
  EXPECT_EQ(s.target_step, 2);
  EXPECT_EQ(s.time_to_target_s, 120.0 - 50.0);
  EXPECT_FALSE(summarize_run(*db_, run, 1.0).target_step.has_value());
}

TEST_F(MetricQueriesTest, CsvExportHasEveryRowExactly) {
  db_->exec("UPDATE runs SET name = 'series, v2' WHERE id = " + std::to_string(run_));
  std::ostringstream out;
  write_metrics_csv(*db_, run_, out);
  std::istringstream in(out.str());
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "run,step,rank,time,tokens,loss,lr,grad_norm,tokens_per_s,tflops,mfu,mem_used,"
            "mem_peak,fwd_ms,bwd_ms,opt_ms,comm_ms,data_ms,loss_scale,skipped_steps,a2a_ms,trained_tokens,shard_ms,"
            "pipe_ms,mtp1_loss,mtp2_loss,mtp3_loss,mtp4_loss");
  std::getline(in, line);
  EXPECT_EQ(line, "\"series, v2\",0,0,1000,0,5,,0,,,,,,,,,,,,0,,,,,,,,");
  std::getline(in, line);
  EXPECT_EQ(line, "\"series, v2\",0,1,1000,0,6,,0,,,,,,,,,,,,0,,,,,,,,");
  std::getline(in, line);
  EXPECT_EQ(line, "\"series, v2\",1,0,1001,100," + fmt::format("{}", value_at(1, 0)) + ",,,,,,,,,,,,,,0,,,,,,,,");
  size_t rows = 3;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, 20000u);
}

TEST_F(MetricQueriesTest, JsonExportHoldsTheWholeRun) {
  insert_event(*db_, run_, Event{0, 5, 3, "nan", "loss is \"NaN\""});
  std::ostringstream out;
  write_run_json(*db_, run_, out);
  const auto json = nlohmann::json::parse(out.str());
  EXPECT_EQ(json["run"]["name"], "series");
  EXPECT_EQ(json["run"]["status"], "created");
  ASSERT_EQ(json["metrics"].size(), 20000u);
  EXPECT_EQ(json["metrics"][2]["step"], 1);
  EXPECT_EQ(json["metrics"][2]["loss"].get<double>(), value_at(1, 0));
  EXPECT_TRUE(json["metrics"][2]["grad_norm"].is_null());
  EXPECT_EQ(json["metrics"][4]["grad_norm"].get<double>(), 2.0);
  ASSERT_EQ(json["events"].size(), 1u);
  EXPECT_EQ(json["events"][0]["message"], "loss is \"NaN\"");
  EXPECT_TRUE(json["checkpoints"].empty());
}

TEST(ConfigDiffTest, ListsTheLeavesThatDiffer) {
  const auto diff = config_diff({R"({"train":{"lr":3e-4,"steps":100},"model":{"n_layer":2}})",
                                 R"({"train":{"lr":1e-4,"steps":100},"model":{"n_layer":2},"data":{"paths":["a"]}})"});
  ASSERT_EQ(diff.size(), 2u);
  EXPECT_EQ(diff[0].key, "data.paths.0");
  EXPECT_EQ(diff[0].values, (std::vector<std::optional<std::string>>{std::nullopt, "\"a\""}));
  EXPECT_EQ(diff[1].key, "train.lr");
  EXPECT_EQ(diff[1].values, (std::vector<std::optional<std::string>>{"0.0003", "0.0001"}));
  // An empty config has no keys: every key of the other one differs, and no blank key shows.
  const auto from_empty = config_diff({"{}", R"({"train":{"lr":3e-4}})"});
  ASSERT_EQ(from_empty.size(), 1u);
  EXPECT_EQ(from_empty[0].key, "train.lr");
  EXPECT_EQ(from_empty[0].values, (std::vector<std::optional<std::string>>{std::nullopt, "0.0003"}));
  EXPECT_EQ(error_of([] { config_diff({"{}", "{oops"}); }),
            "store: config 2 of the comparison is not valid JSON");
}

}  // namespace
}  // namespace kiln::store
