#include "store/alert_rows.h"

#include <gtest/gtest.h>

#include <cmath>

#include "store/rank_places.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::run_info;
using testing_util::StoreTest;

class AlertRowsTest : public StoreTest {};

TEST_F(AlertRowsTest, AnAlertIsARowAndAnEventAndCountsForItsRun) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("spiky"));
    Alert spike;
    spike.step = 40;
    spike.rule = "loss_spike";
    spike.value = 7.5;
    spike.threshold = 6;
    spike.message = "loss 7.5 is 7.5 standard deviations above the last 50 steps' mean";
    spike.action = "checkpoint";
    writer.log_alert(spike);
    Alert slow;
    slow.step = 41;
    slow.rule = "straggler";
    slow.rank = 3;
    slow.value = 1.4;
    slow.message = "rank 3 on h2 " + std::string(5000, 'x');
    writer.log_alert(slow);
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  const std::vector<Alert> alerts = list_alerts(*db, id);
  ASSERT_EQ(alerts.size(), 2u);
  EXPECT_EQ(alerts[0].rule, "loss_spike");
  EXPECT_EQ(alerts[0].step, 40);
  EXPECT_FALSE(alerts[0].rank.has_value());
  EXPECT_DOUBLE_EQ(alerts[0].value, 7.5);
  EXPECT_DOUBLE_EQ(alerts[0].threshold, 6);
  EXPECT_EQ(alerts[0].action, "checkpoint");
  EXPECT_GT(alerts[0].time, 1.7e9);
  EXPECT_EQ(alerts[1].rank, 3);
  EXPECT_TRUE(std::isnan(alerts[1].threshold));
  EXPECT_LE(alerts[1].message.size(), kMaxAlertMessageBytes) << "a long message is cut";
  // The newest one alone.
  const std::vector<Alert> newest = list_alerts(*db, id, 1);
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(newest[0].rule, "straggler");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM events WHERE kind = 'alert' AND message LIKE 'loss_spike: loss 7.5%'"), 1);
  EXPECT_EQ(alert_counts(*db), (std::map<int64_t, int64_t>{{id, 2}}));
  EXPECT_EQ(alert_counts_by_rule(*db, id), (std::map<std::string, int64_t>{{"loss_spike", 1}, {"straggler", 1}}));
  EXPECT_TRUE(alert_counts_by_rule(*db, id + 1).empty());
}

TEST_F(AlertRowsTest, RankPlacesAreReplacedWhenARunRecordsThemAgain) {
  RunWriter writer(path());
  const int64_t id = writer.create_run(run_info("placed"));
  writer.record_ranks({{0, "h1", "cpu", 100}, {1, "h2", "cpu", 200}});
  writer.record_ranks({{0, "h3", "cuda:0", 300}, {1, "h3", "cuda:1", std::nullopt}});
  writer.finish(RunStatus::Completed);
  writer.flush();
  auto db = open_store(path(), Access::ReadOnly);
  const std::vector<RankPlace> places = list_rank_places(*db, id);
  ASSERT_EQ(places.size(), 2u);
  EXPECT_EQ(places[0].host, "h3");
  EXPECT_EQ(places[0].device, "cuda:0");
  EXPECT_EQ(places[0].pid, 300);
  EXPECT_EQ(places[1].device, "cuda:1");
  EXPECT_FALSE(places[1].pid.has_value());
}

TEST_F(AlertRowsTest, AlertsAndPlacesNeedARun) {
  RunWriter writer(path());
  EXPECT_NE(testing_util::error_of([&] { writer.log_alert(Alert{}); }).find("before create_run"), std::string::npos);
  EXPECT_NE(testing_util::error_of([&] { writer.record_ranks({}); }).find("before create_run"), std::string::npos);
}

}  // namespace
}  // namespace kiln::store
