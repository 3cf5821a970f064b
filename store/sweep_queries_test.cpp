// Reading sweeps: the list and its progress counts, resolving a typed sweep, and one sweep's
// points with their runs' final and best figures, over stores built with RunWriter and the
// sweep tables' own inserts (what kiln sweep writes).
#include "store/sweep_queries.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;
using testing_util::run_info;
using testing_util::StoreTest;

class SweepQueriesTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    db_ = open_store(path(), Access::ReadWrite);
  }

  int64_t add_sweep(const std::string& name, double created_at, std::optional<double> heartbeat_at,
                    std::optional<double> ended_at) {
    Statement st(*db_, "INSERT INTO sweeps (name, created_at, spec_json, command_line, heartbeat_at, "
                       "ended_at, status) VALUES (?, ?, '{\"grid\":{}}', ?, ?, ?, ?)");
    st.bind_all(name, created_at, "kiln sweep --name " + name, heartbeat_at, ended_at,
                std::string(ended_at ? "ended" : "live"));
    st.run();
    return db_->last_insert_rowid();
  }

  void add_point(int64_t sweep_id, int64_t point, const std::string& params, std::optional<std::string> run) {
    Statement st(*db_, "INSERT INTO sweep_points (sweep_id, point, params_json, run_name) VALUES (?, ?, ?, ?)");
    st.bind_all(sweep_id, point, params, run);
    st.run();
  }

  // A run of the sweep's point with two ranks whose losses at each step are `losses[i]` and
  // `losses[i] + 0.2` (mean losses[i] + 0.1), tokens/s 100 x step on rank 0 and 300 x step
  // on rank 1, and one validation per given loss at steps 10, 20, ...
  int64_t add_run(const std::string& name, int64_t sweep_id, int64_t point, const std::vector<double>& losses,
                  const std::vector<double>& valid, RunStatus end) {
    RunWriter writer(path());
    RunInfo info = run_info(name);
    info.sweep_id = sweep_id;
    info.sweep_point = point;
    const int64_t id = writer.create_run(info);
    for (size_t i = 0; i < losses.size(); ++i) {
      const auto step = static_cast<int64_t>(i + 1);
      std::vector<MetricRow> rows(2);
      for (int r = 0; r < 2; ++r) {
        rows[r].step = step;
        rows[r].rank = r;
        rows[r].loss = losses[i] + 0.2 * r;
        rows[r].tokens_per_s = 100.0 * static_cast<double>(step) * (1 + 2 * r);
      }
      writer.log_metrics(rows);
    }
    for (size_t i = 0; i < valid.size(); ++i) writer.log_valid({static_cast<int64_t>(10 * (i + 1)), 0, valid[i]});
    if (end != RunStatus::Running) writer.finish(end);
    writer.flush();
    return id;
  }

  std::unique_ptr<Database> db_;
};

TEST_F(SweepQueriesTest, DetailsGiveEachPointsParamsRunAndFigures) {
  const double now = unix_now();
  const int64_t sweep = add_sweep("lr-sweep", now - 100, now, std::nullopt);
  add_point(sweep, 0, R"({"train.lr":0.001,"model.d_model":128})", "lr-sweep-0");
  add_point(sweep, 1, R"({"train.lr":0.003,"model.d_model":128})", "lr-sweep-1");
  add_point(sweep, 2, R"({"train.lr":0.001,"model.d_model":256})", std::nullopt);
  const int64_t run0 = add_run("lr-sweep-0", sweep, 0, {4.0, 2.5, 3.0}, {3.5, 2.9}, RunStatus::Completed);
  add_run("lr-sweep-1", sweep, 1, {5.0, 4.0}, {}, RunStatus::Failed);

  const SweepDetails d = sweep_details(*db_, sweep);
  EXPECT_EQ(d.sweep.name, "lr-sweep");
  EXPECT_EQ(d.sweep.status, SweepStatus::Live);
  EXPECT_EQ(d.sweep.command_line, "kiln sweep --name lr-sweep");
  EXPECT_EQ(d.sweep.points, 3);
  EXPECT_EQ(d.sweep.launched, 2);
  EXPECT_EQ(d.sweep.completed, 1);
  EXPECT_EQ(d.sweep.failed, 1);
  EXPECT_EQ(d.sweep.running, 0);
  EXPECT_EQ(d.parameters, (std::vector<std::string>{"train.lr", "model.d_model"})) << "the points' own key order";

  ASSERT_EQ(d.points.size(), 3u);
  const SweepPointRow& p0 = d.points[0];
  EXPECT_EQ(p0.point, 0);
  EXPECT_EQ(p0.params_json, R"({"train.lr":0.001,"model.d_model":128})");
  EXPECT_EQ(p0.run_id, run0);
  EXPECT_EQ(p0.run_name, "lr-sweep-0");
  EXPECT_EQ(p0.status, RunStatus::Completed);
  EXPECT_EQ(p0.last_step, 3);
  EXPECT_DOUBLE_EQ(p0.final_loss, 3.1) << "the mean over ranks at the last step";
  EXPECT_DOUBLE_EQ(p0.best_loss, 2.6) << "the lowest per-step mean";
  EXPECT_DOUBLE_EQ(p0.final_valid_loss, 2.9);
  EXPECT_DOUBLE_EQ(p0.best_valid_loss, 2.9);
  EXPECT_DOUBLE_EQ(p0.tokens_per_s, 600.0) << "(300 + 900) / 2 at step 3";

  EXPECT_EQ(d.points[1].status, RunStatus::Failed);
  EXPECT_DOUBLE_EQ(d.points[1].final_loss, 4.1);
  EXPECT_TRUE(std::isnan(d.points[1].final_valid_loss)) << "no validation";

  const SweepPointRow& p2 = d.points[2];
  EXPECT_EQ(p2.status, RunStatus::Created) << "not launched";
  EXPECT_FALSE(p2.run_id);
  EXPECT_EQ(p2.run_name, "");
  EXPECT_FALSE(p2.last_step);
  EXPECT_TRUE(std::isnan(p2.final_loss));
  EXPECT_TRUE(std::isnan(p2.best_loss));
  EXPECT_TRUE(std::isnan(p2.tokens_per_s));
}

TEST_F(SweepQueriesTest, APointNamedButNotYetRecordedReadsAsCreated) {
  const int64_t sweep = add_sweep("s", unix_now(), unix_now(), std::nullopt);
  add_point(sweep, 0, R"({"train.lr":0.1})", "s-0");
  const SweepDetails d = sweep_details(*db_, sweep);
  ASSERT_EQ(d.points.size(), 1u);
  EXPECT_EQ(d.points[0].run_name, "s-0");
  EXPECT_FALSE(d.points[0].run_id);
  EXPECT_EQ(d.points[0].status, RunStatus::Created);
  EXPECT_EQ(d.sweep.launched, 1);
}

TEST_F(SweepQueriesTest, ARunningPointWithAStaleHeartbeatIsLostAndCountsAsFailed) {
  const int64_t sweep = add_sweep("s", unix_now(), unix_now(), std::nullopt);
  add_point(sweep, 0, R"({"train.lr":0.1})", "s-0");
  add_point(sweep, 1, R"({"train.lr":0.2})", "s-1");
  add_run("s-0", sweep, 0, {3.0}, {}, RunStatus::Running);
  add_run("s-1", sweep, 1, {3.0}, {}, RunStatus::Running);
  db_->exec("UPDATE runs SET status = 'running', heartbeat_at = 1000 WHERE name = 's-1'");
  const SweepDetails d = sweep_details(*db_, sweep);
  EXPECT_EQ(d.points[0].status, RunStatus::Running);
  EXPECT_EQ(d.points[1].status, RunStatus::Lost);
  EXPECT_EQ(d.sweep.running, 1);
  EXPECT_EQ(d.sweep.failed, 1);
}

TEST_F(SweepQueriesTest, ListIsNewestFirstWithStatusAndLimit) {
  const double now = unix_now();
  const int64_t cut = add_sweep("cut", now - 1200, now - 1100, now - 1100);
  db_->exec("UPDATE sweeps SET status = 'interrupted' WHERE id = " + std::to_string(cut));
  add_sweep("old", now - 1000, now - 900, now - 900);
  add_sweep("stale", now - 500, now - 400, std::nullopt);
  const int64_t fresh = add_sweep("fresh", now - 10, now, std::nullopt);
  add_point(fresh, 0, R"({"a":1})", std::nullopt);
  add_point(fresh, 1, R"({"a":2})", std::nullopt);

  const auto all = list_sweeps(*db_);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].name, "fresh");
  EXPECT_EQ(all[0].status, SweepStatus::Live);
  EXPECT_EQ(all[0].points, 2);
  EXPECT_EQ(all[0].launched, 0);
  EXPECT_EQ(all[1].name, "stale");
  EXPECT_EQ(all[1].status, SweepStatus::Interrupted) << "its heartbeat is older than the staleness threshold";
  EXPECT_EQ(all[1].points, 0);
  EXPECT_EQ(all[2].name, "old");
  EXPECT_EQ(all[2].status, SweepStatus::Ended);
  ASSERT_TRUE(all[2].ended_at);
  EXPECT_EQ(all[3].name, "cut");
  EXPECT_EQ(all[3].status, SweepStatus::Interrupted) << "as recorded";

  const auto newest = list_sweeps(*db_, 2);
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[1].name, "stale");
}

TEST_F(SweepQueriesTest, ResolveTakesAnIdANameOrAUniquePrefix) {
  const int64_t a = add_sweep("lr-search", 1, std::nullopt, 2.0);
  const int64_t b = add_sweep("lr-search-2", 2, std::nullopt, 3.0);
  const int64_t c = add_sweep("width", 3, std::nullopt, 4.0);
  EXPECT_EQ(resolve_sweep(*db_, std::to_string(c)), c);
  EXPECT_EQ(resolve_sweep(*db_, "lr-search"), a) << "an exact name beats a prefix of another";
  EXPECT_EQ(resolve_sweep(*db_, "lr-search-"), b);
  EXPECT_EQ(resolve_sweep(*db_, "wid"), c);
  EXPECT_NE(error_of([&] { resolve_sweep(*db_, "lr"); }).find("ambiguous: lr-search (id 1), lr-search-2 (id 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resolve_sweep(*db_, "search"); }).find("did you mean lr-search-2 (id 2), lr-search (id 1)?"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resolve_sweep(*db_, "depth"); }).find("it holds 3 sweeps"), std::string::npos);
  EXPECT_NE(error_of([&] { resolve_sweep(*db_, ""); }).find("no sweep given"), std::string::npos);
  EXPECT_NE(error_of([&] { sweep_details(*db_, 99); }).find("no sweep with id 99"), std::string::npos);
}

TEST(SweepBestPoint, IsTheLowestFinalValidLossElseTheLowestFinalLoss) {
  std::vector<SweepPointRow> points(3);
  for (int64_t i = 0; i < 3; ++i) {
    points[i].point = i;
    points[i].run_name = "p" + std::to_string(i);
    points[i].status = RunStatus::Completed;
  }
  EXPECT_FALSE(best_point(points)) << "no figures yet";
  points[0].final_loss = 2.0;
  points[1].final_loss = 1.5;
  auto best = best_point(points);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->point, 1);
  EXPECT_EQ(best->metric, "final_loss");
  points[0].final_valid_loss = 2.2;
  points[2].final_valid_loss = 2.4;
  best = best_point(points);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->point, 0) << "validation decides once any point has it";
  EXPECT_EQ(best->metric, "final_valid_loss");
  EXPECT_DOUBLE_EQ(best->value, 2.2);
}

TEST(SweepBestPoint, IsAmongCompletedPointsElseTheBestSoFarMarkedPartial) {
  std::vector<SweepPointRow> points(3);
  for (int64_t i = 0; i < 3; ++i) {
    points[i].point = i;
    points[i].run_name = "p" + std::to_string(i);
    points[i].steps = 1000;
  }
  // Point 0 stopped at step 26 (a sweep interrupted), point 1 still runs: the best so far.
  points[0].status = RunStatus::Stopped;
  points[0].last_step = 26;
  points[0].final_loss = 3.0;
  points[1].status = RunStatus::Running;
  points[1].last_step = 10;
  points[1].final_loss = 4.0;
  auto best = best_point(points);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->point, 0);
  EXPECT_TRUE(best->partial);
  EXPECT_EQ(best_label(*best), "best so far (partial: 26/1000 steps)");

  // Once point 2 completes, it is the best, though its loss is higher than the stopped one's.
  points[2].status = RunStatus::Completed;
  points[2].last_step = 1000;
  points[2].final_loss = 3.5;
  best = best_point(points);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->point, 2);
  EXPECT_FALSE(best->partial);
  EXPECT_DOUBLE_EQ(best->value, 3.5);
  EXPECT_EQ(best_label(*best), "best");
  // Validation that only a stopped point has does not decide among the completed ones.
  points[0].final_valid_loss = 2.0;
  EXPECT_EQ(best_point(points)->metric, "final_loss");
}

TEST(SweepStatusText, ReadsBackWhatItWrites) {
  for (SweepStatus s : {SweepStatus::Live, SweepStatus::Ended, SweepStatus::Interrupted})
    EXPECT_EQ(parse_sweep_status(to_string(s)), s);
  EXPECT_EQ(to_string(SweepStatus::Interrupted), "interrupted");
  EXPECT_NE(error_of([] { parse_sweep_status("done"); }).find("unknown sweep status 'done'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::store
