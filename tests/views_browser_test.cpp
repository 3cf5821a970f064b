// End-to-end: the dashboard's views where a real store's contents crowd them, in headless
// Chromium (tests/browser/views.mjs) against `kiln serve`. The store, written with the
// store's writers: a sweep of 8 points over train.lr x train.warmup (5, 6, 9 and 90 steps:
// three values close together on a linear axis), each point's run carrying three tags and a
// CPU's long name, points 6 and 7 still training (this test logs a step of each every 300 ms
// while the browser looks) with interim losses above every finished point's; and a finished
// 4-rank expert-parallel run whose rank 2 works the longest while rank 1 reports the lowest
// tokens/s. Each test checks one view:
//   - the runs table fits a 1400-px window with every column, and a narrower one by hiding
//     the least useful columns, named above it;
//   - the charts label as "(slowest)" the rank the Ranks panel highlights (the store's);
//   - parallel coordinates: no two labels overlap, and the training points are drawn apart
//     and left out of the loss axis.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "store/run_writer.h"
#include "store/schema.h"
#include "store/sweep_writer.h"
#include "store/test_util.h"
#include "tests/browser_check.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

constexpr double kViewLrs[] = {1e-4, 1e-3};
constexpr int kWarmups[] = {5, 6, 9, 90};
constexpr int kViewSteps = 20;

store::RunInfo point_run(const std::string& name, int64_t sweep_id, int point) {
  store::RunInfo info = store::testing_util::run_info(name);
  info.config_json = R"({"train": {"steps": 20}})";
  info.device = "AMD EPYC 7763 64-Core Processor";
  info.tags = {"baseline", "lr-warmup", "2026-q4"};
  info.sweep_id = sweep_id;
  info.sweep_point = point;
  return info;
}

// A point's loss falls towards 2.0 + 0.1 x its number: a finished point's is 2.1-2.6 at its
// last step, and a training point's (6 and 7) stays above 2.6 however long it trains.
double view_loss_at(int point, int64_t step) { return 2.0 + 0.1 * point + 2.0 / static_cast<double>(step); }

void log_view_step(store::RunWriter& writer, int point, int64_t step) {
  store::MetricRow row;
  row.step = step;
  row.loss = view_loss_at(point, step);
  row.tokens_per_s = 1000;
  writer.log_metrics({row});
}

// Rank 2 works longest (forward, backward, optimizer); rank 1, waiting longest in its
// all-to-alls, reports the lowest tokens/s.
std::vector<store::MetricRow> expert_parallel_rows(int64_t step) {
  std::vector<store::MetricRow> rows = store::testing_util::interval(step, 4);
  for (auto& m : rows) {
    m.fwd_ms = m.rank == 2 ? 14 : 10;
    m.bwd_ms = m.rank == 2 ? 28 : 20;
    m.opt_ms = 2;
    m.a2a_ms = m.rank == 1 ? 9 : 3;
    m.comm_ms = m.rank == 2 ? 1 : 6;
    m.tokens_per_s = m.rank == 1 ? 700 : 1000 + 10.0 * m.rank;
  }
  return rows;
}

// The store above, served; the training points' writers log while `check` runs in the browser.
class ViewsBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(std::string("views_browser_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    store_ = dir_ + "/runs.db";
    auto db = store::open_store(store_, store::Access::ReadWrite);
    store::NewSweep sweep{"lr-warmup", R"({"grid": {}})", "kiln sweep --config base.json --grid train.lr=1e-4,1e-3 --grid train.warmup=5,6,9,90",
                          dir_, "testhost", 0, {}};
    for (double lr : kViewLrs)
      for (int warmup : kWarmups)
        sweep.points.push_back(R"({"train.lr":)" + std::to_string(lr) + R"(,"train.warmup":)" + std::to_string(warmup) + "}");
    const int64_t sweep_id = store::create_sweep(*db, sweep);
    for (int point = 0; point < 8; ++point) {
      const std::string name = "lr-warmup-" + std::to_string(point);
      store::set_point_run(*db, sweep_id, point, name);
      auto writer = std::make_unique<store::RunWriter>(store_);
      writer->create_run(point_run(name, sweep_id, point));
      const bool finished = point < 6;
      for (int64_t step = 1; step <= (finished ? kViewSteps : 2); ++step) log_view_step(*writer, point, step);
      writer->flush();
      if (finished) {
        writer->finish(store::RunStatus::Completed);
        writer->flush();
      } else {
        training_.push_back({std::move(writer), point, 2});
      }
    }
    store::RunWriter moe(store_);
    store::RunInfo info = store::testing_util::run_info("moe-ep4");
    info.layout = "tp1.pp1.dp4.ep4";
    info.tags = {"moe"};
    moe.create_run(info);
    moe.record_ranks({{0, "node-a", "cpu", 4100}, {1, "node-a", "cpu", 4101}, {2, "node-b", "cpu", 4200}, {3, "node-b", "cpu", 4201}});
    for (int64_t step = 1; step <= 30; ++step) moe.log_metrics(expert_parallel_rows(step));
    moe.finish(store::RunStatus::Completed);
    moe.flush();

    const std::string serve_log = dir_ + "/serve.log";
    server_ = start_background(kiln + " serve --store " + store_ + " --listen 127.0.0.1:0", serve_log);
    url_ = wait_for_url(serve_log);
    ASSERT_FALSE(url_.empty()) << read_text(serve_log);
  }

  void TearDown() override {
    for (auto& t : training_) {
      t.writer->finish(store::RunStatus::Completed);
      t.writer->flush();
    }
    if (server_ > 0) {
      ::kill(server_, SIGINT);
      EXPECT_EQ(wait_exit(server_), 0);
    }
  }

  // Runs views.mjs URL CHECK; its output on failure.
  void check(const std::string& what) {
    const std::string log = dir_ + "/browser.log";
    const int status = watch_browser("node " KILN_SOURCE_DIR "/tests/browser/views.mjs " + url_ + " " + what, log, [&] {
      for (auto& t : training_) {
        log_view_step(*t.writer, t.point, ++t.step);
        t.writer->flush();
      }
    });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(log);
  }

  struct Training {
    std::unique_ptr<store::RunWriter> writer;
    int point;
    int64_t step;
  };
  std::string dir_, store_, url_;
  int server_ = 0;
  std::vector<Training> training_;
};

TEST_F(ViewsBrowser, RunsTableFitsTheWindowByWrappingThenHidingColumnsByPriority) { check("runs-table"); }

TEST_F(ViewsBrowser, ChartsLabelTheSlowestRankTheRanksPanelHighlights) { check("slowest-rank"); }

TEST_F(ViewsBrowser, ParallelCoordinatesKeepLabelsApartAndTrainingPointsOffTheLossAxis) { check("parallel-coordinates"); }

}  // namespace
}  // namespace kiln::test
