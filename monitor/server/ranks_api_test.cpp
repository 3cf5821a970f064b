// The straggler view's reads over real HTTP against a real server and store:
// GET /api/runs/{run}/ranks, /rank-heat and /alerts (values, bounds, a run recorded without
// its ranks' places, bad input), and the alert badge in the runs list.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"
#include "store/metric_fields.h"

namespace kiln::monitor::test {
namespace {

// Four ranks at `step`; rank 3 works `slow` times as long as the others.
std::vector<store::MetricRow> four_ranks(int64_t step, double slow) {
  std::vector<store::MetricRow> rows;
  for (int r = 0; r < 4; ++r) {
    store::MetricRow m;
    m.step = step;
    m.rank = r;
    m.time = 1.7e9 + static_cast<double>(step);
    const double scale = r == 3 ? slow : 1;
    m.fwd_ms = 10 * scale;
    m.bwd_ms = 20 * scale;
    m.opt_ms = 2 * scale;
    m.comm_ms = r == 3 ? 1 : 1 + 32 * (slow - 1);
    m.data_ms = 0.5;
    m.mem_used = int64_t{200 + r} << 20;
    m.mem_peak = int64_t{300 + r} << 20;
    m.tokens_per_s = 4000;
    rows.push_back(m);
  }
  return rows;
}

// A wide step (more than 8 ranks): four_ranks' and 8 more ranks working as rank 0.
std::vector<store::MetricRow> twelve_ranks(int64_t step, double slow) {
  std::vector<store::MetricRow> rows = four_ranks(step, slow);
  for (int r = 4; r < 12; ++r) {
    rows.push_back(rows[0]);
    rows.back().rank = r;
  }
  return rows;
}

class RanksApiTest : public ServerTest {
 protected:
  // beta: four ranks on two hosts, steps 6..15, rank 3 slow (1.5x) from step 11; two alerts.
  void log_straggler() {
    live_writer_->record_ranks({{0, "gpu-a", "cuda:0", 11}, {1, "gpu-a", "cuda:1", 12},
                                {2, "gpu-b", "cuda:0", 13}, {3, "gpu-b", "cuda:1", 14}});
    for (int64_t step = 6; step <= 15; ++step) live_writer_->log_metrics(four_ranks(step, step >= 11 ? 1.5 : 1));
    store::Alert nan;
    nan.step = 8;
    nan.rule = "nan";
    nan.message = "loss is NaN";
    live_writer_->log_alert(nan);
    store::Alert slow;
    slow.step = 13;
    slow.rule = "straggler";
    slow.rank = 3;
    slow.value = 1.5;
    slow.threshold = 1.2;
    slow.message = "rank 3 on gpu-b works 1.50x the median rank for 3 steps";
    slow.action = "checkpoint";
    live_writer_->log_alert(slow);
    live_writer_->flush();
  }
};

TEST_F(RanksApiTest, RanksShowsPlacesTheLatestSplitAndTheSlowest) {
  log_straggler();
  const HttpResult r = get(port_, "/api/runs/beta/ranks", {kAuth});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto body = r.json();
  EXPECT_EQ(body["step"], 15);
  EXPECT_EQ(body["slowest"], 3);
  EXPECT_DOUBLE_EQ(body["median_working_ms"].get<double>(), 32);
  ASSERT_EQ(body["ranks"].size(), 4u);
  const auto& slow = body["ranks"][3];
  EXPECT_EQ(slow["rank"], 3);
  EXPECT_EQ(slow["host"], "gpu-b");
  EXPECT_EQ(slow["device"], "cuda:1");
  EXPECT_EQ(slow["pid"], 14);
  EXPECT_EQ(slow["slowest"], true);
  EXPECT_EQ(slow["step"], 15);
  EXPECT_DOUBLE_EQ(slow["fwd_ms"].get<double>(), 15);
  EXPECT_DOUBLE_EQ(slow["working_ms"].get<double>(), 48);
  EXPECT_DOUBLE_EQ(slow["step_ms"].get<double>(), 48 + 1 + 0.5);
  EXPECT_DOUBLE_EQ(slow["relative"].get<double>(), 1.5);
  EXPECT_EQ(slow["mem_peak"], int64_t{303} << 20);
  EXPECT_TRUE(slow["a2a_ms"].is_null());
  for (const store::MetricField& f : store::kMetricFields)
    EXPECT_EQ(slow.contains(f.name), (f.views & store::kInRanks) != 0 || f.name == "step" || f.name == "rank" ||
                                         f.name == "time")  // the row's place, always there
        << f.name;
  const auto& fast = body["ranks"][0];
  EXPECT_EQ(fast["slowest"], false);
  EXPECT_DOUBLE_EQ(fast["comm_ms"].get<double>(), 17);
  EXPECT_DOUBLE_EQ(fast["relative"].get<double>(), 1);
}

TEST_F(RanksApiTest, ARunWithoutPlacesHasItsRanksWithoutHosts) {
  const auto body = get(port_, "/api/runs/alpha/ranks", {kAuth}).json();
  EXPECT_EQ(body["step"], 30);
  ASSERT_EQ(body["ranks"].size(), 2u);
  EXPECT_EQ(body["ranks"][1]["host"], "");
  EXPECT_TRUE(body["ranks"][1]["pid"].is_null());
  EXPECT_DOUBLE_EQ(body["ranks"][1]["step_ms"].get<double>(), 1.5);
  EXPECT_TRUE(body["slowest"].is_null()) << "ranks that took the same time have no slowest";
  EXPECT_EQ(get(port_, "/api/runs/nosuch/ranks", {kAuth}).status, 404u);
}

TEST_F(RanksApiTest, HeatStripIsRanksByStepsWithinItsBounds) {
  log_straggler();
  const auto body = get(port_, "/api/runs/beta/rank-heat?from=6", {kAuth}).json();
  EXPECT_EQ(body["steps"], nlohmann::json({6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(body["ranks"], nlohmann::json({0, 1, 2, 3}));
  EXPECT_EQ(body["group"], 1);
  EXPECT_DOUBLE_EQ(body["relative"][3][4].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(body["relative"][3][5].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(body["step_ms"][3][5].get<double>(), 49.5);
  // Step 5 has two ranks (the fixture's), so ranks 2 and 3 have no cell there.
  const auto all = get(port_, "/api/runs/beta/rank-heat?columns=3", {kAuth}).json();
  EXPECT_EQ(all["steps"], nlohmann::json({5, 10, 15}));
  EXPECT_TRUE(all["relative"][3][0].is_null());
  const auto folded = get(port_, "/api/runs/beta/rank-heat?rows=2&from=15", {kAuth}).json();
  EXPECT_EQ(folded["group"], 2);
  EXPECT_EQ(folded["ranks"], nlohmann::json({0, 2}));
  EXPECT_DOUBLE_EQ(folded["relative"][1][0].get<double>(), 1.5) << "a row shows its slowest rank";
  // `relative` comes to four decimals: rank 3 working 4/3 the median's time reads 1.3333.
  live_writer_->log_metrics(four_ranks(16, 4.0 / 3));
  live_writer_->flush();
  const auto third = get(port_, "/api/runs/beta/rank-heat?from=16", {kAuth}).json();
  EXPECT_EQ(third["relative"][3][0].get<double>(), 1.3333);
  EXPECT_EQ(third["relative"][0][0].get<double>(), 1.0);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"columns=0", "columns must be from 1 to 512"},
      {"columns=513", "columns must be from 1 to 512"},
      {"rows=1025", "rows must be from 1 to 1024"},
      {"from=9&to=3", "from (9) is after to (3)"},
      {"from=x", "from"},
  };
  for (const auto& [query, error] : cases) {
    const HttpResult r = get(port_, "/api/runs/beta/rank-heat?" + query, {kAuth});
    EXPECT_EQ(r.status, 400u) << query;
    const std::string message = r.json()["error"].get<std::string>();
    EXPECT_NE(message.find(error), std::string::npos) << query << ": " << message;
  }
}

TEST_F(RanksApiTest, AlertsNewestLastWithTheRanksHostAndABadgeInTheRunsList) {
  log_straggler();
  const auto alerts = get(port_, "/api/runs/beta/alerts", {kAuth}).json();
  ASSERT_EQ(alerts.size(), 2u);
  EXPECT_EQ(alerts[0]["rule"], "nan");
  EXPECT_TRUE(alerts[0]["rank"].is_null());
  EXPECT_TRUE(alerts[0]["host"].is_null());
  EXPECT_EQ(alerts[1]["rule"], "straggler");
  EXPECT_EQ(alerts[1]["step"], 13);
  EXPECT_EQ(alerts[1]["rank"], 3);
  EXPECT_EQ(alerts[1]["host"], "gpu-b");
  EXPECT_DOUBLE_EQ(alerts[1]["value"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(alerts[1]["threshold"].get<double>(), 1.2);
  EXPECT_EQ(alerts[1]["action"], "checkpoint");
  const auto newest = get(port_, "/api/runs/beta/alerts?limit=1", {kAuth}).json();
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(newest[0]["rule"], "straggler");
  EXPECT_EQ(get(port_, "/api/runs/beta/alerts?limit=0", {kAuth}).status, 400u);
  EXPECT_EQ(get(port_, "/api/runs/beta/alerts?limit=1001", {kAuth}).status, 400u);
  EXPECT_TRUE(get(port_, "/api/runs/alpha/alerts", {kAuth}).json().empty());

  const auto runs = get(port_, "/api/runs", {kAuth}).json()["runs"];
  for (const auto& run : runs) {
    if (run["name"] == "beta") {
      EXPECT_EQ(run["alerts"], 2);
      EXPECT_EQ(run["latest_alert"], "straggler: rank 3 on gpu-b works 1.50x the median rank for 3 steps");
    } else {
      EXPECT_EQ(run["alerts"], 0);
      EXPECT_FALSE(run.contains("latest_alert"));
    }
  }
  // Each alert is an event too, which the charts mark.
  const auto events = get(port_, "/api/runs/beta/events", {kAuth}).json();
  size_t marked = 0;
  for (const auto& e : events) marked += e["kind"] == "alert";
  EXPECT_EQ(marked, 2u);
}

// A wide run (more than 8 ranks a step) answers a chart of every rank with rank 0's series and
// the spread across ranks; alpha's 2 ranks still answer a series a rank.
TEST_F(RanksApiTest, EveryRankOfAWideRunIsTheSpreadAcrossRanksBesideRankZero) {
  for (int64_t step = 6; step <= 9; ++step) live_writer_->log_metrics(twelve_ranks(step, step == 8 ? 3 : 1));
  live_writer_->flush();
  const HttpResult r = get(port_, "/api/runs/beta/metrics?keys=fwd_ms,loss&points=1000", {kAuth});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto body = r.json();
  ASSERT_EQ(body["series"]["fwd_ms"].size(), 1u);
  EXPECT_EQ(body["series"]["fwd_ms"][0]["rank"], 0);
  EXPECT_FALSE(body["spread"].contains("loss"));  // the same on every rank: rank 0's says it
  const auto& fwd = body["spread"]["fwd_ms"];
  EXPECT_EQ(fwd["step"], nlohmann::json({6, 7, 8, 9}));
  EXPECT_EQ(fwd["ranks"][2], 12);
  EXPECT_DOUBLE_EQ(fwd["min"][2].get<double>(), 10);
  EXPECT_DOUBLE_EQ(fwd["max"][2].get<double>(), 30);
  EXPECT_DOUBLE_EQ(fwd["mean"][2].get<double>(), (11 * 10 + 30) / 12.0);
  EXPECT_EQ(fwd["slowest_rank"][2], 3);
  EXPECT_DOUBLE_EQ(fwd["slowest"][2].get<double>(), 30);
  // ranks= still answers those ranks' own series.
  const auto rank3 = get(port_, "/api/runs/beta/metrics?keys=fwd_ms&ranks=3", {kAuth}).json();
  EXPECT_FALSE(rank3.contains("spread"));
  EXPECT_EQ(rank3["series"]["fwd_ms"][0]["rank"], 3);
  const auto alpha = get(port_, "/api/runs/alpha/metrics?keys=fwd_ms", {kAuth}).json();
  EXPECT_FALSE(alpha.contains("spread"));
  EXPECT_EQ(alpha["series"]["fwd_ms"].size(), 2u);
}

// The run's answer of a wide latest step: rank 0's row and the step's spread, not every
// rank's row (4,096 of them were 1.9 MB that the run page did not draw); Prometheus still
// has every rank's gauge. alpha's 2 ranks keep their rows.
TEST_F(RanksApiTest, AWideLatestStepIsRankZerosRowAndTheSpread) {
  for (int64_t step = 16; step <= 17; ++step) live_writer_->log_metrics(twelve_ranks(step, step == 17 ? 3 : 1));
  live_writer_->flush();
  const auto beta = get(port_, "/api/runs/beta", {kAuth}).json();
  ASSERT_EQ(beta["latest_metrics"].size(), 1u);
  EXPECT_EQ(beta["latest_metrics"][0]["rank"], 0);
  EXPECT_EQ(beta["latest_metrics"][0]["step"], 17);
  EXPECT_EQ(beta["latest_ranks"], 12);
  const auto& fwd = beta["latest_spread"]["fwd_ms"];
  EXPECT_EQ(fwd["step"], nlohmann::json({17}));
  EXPECT_EQ(fwd["slowest_rank"][0], 3);
  EXPECT_DOUBLE_EQ(fwd["max"][0].get<double>(), 30);
  const auto alpha = get(port_, "/api/runs/alpha", {kAuth}).json();
  EXPECT_EQ(alpha["latest_metrics"].size(), 2u);
  EXPECT_EQ(alpha["latest_ranks"], 2);
  EXPECT_FALSE(alpha.contains("latest_spread"));
  const std::string scrape = get(port_, "/metrics", {kAuth}).body;
  EXPECT_NE(scrape.find("rank=\"11\""), std::string::npos) << scrape;
}

}  // namespace
}  // namespace kiln::monitor::test
