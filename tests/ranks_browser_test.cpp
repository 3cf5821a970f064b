// End-to-end: the run page's straggler view and alerts in headless Chromium
// (tests/browser/ranks.mjs) against `kiln serve`, over a store holding a steady run and a live
// 4-rank run on two hosts whose rank 3 turns slow, with the alerts its rules would fire, and a
// live run of 12 ranks, whose charts draw the spread across ranks (its live steps' from the
// WebSocket), a run of 300 ranks, whose table draws only the rows in view, and a live run that
// turns from 4 ranks to 12 while its page is open. The test keeps
// logging steps of both live runs while the browser looks. A screenshot of the Ranks panel lands in
// build/screenshots/ranks/ (docs/images/straggler-view.png).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

#include "store/run_writer.h"
#include "store/test_util.h"
#include "tests/browser_check.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

constexpr int64_t kSlowFrom = 25;

// Every rank's row at `step`: rank 3 works 1.6 times as long from kSlowFrom on, and the
// others wait for it in exposed communication.
std::vector<store::MetricRow> step_rows(int64_t step, int ranks) {
  std::vector<store::MetricRow> rows = store::testing_util::interval(step, ranks);
  for (auto& m : rows) {
    const bool slow = m.rank == 3 && step >= kSlowFrom;
    const double wobble = 0.2 * static_cast<double>((step + m.rank) % 3);
    m.fwd_ms = (slow ? 16 : 10) + wobble;
    m.bwd_ms = slow ? 32 : 20;
    m.opt_ms = slow ? 3.2 : 2;
    m.comm_ms = ranks > 1 && step >= kSlowFrom && !slow ? 19.2 : 1;
    m.data_ms = 0.4;
    m.mem_peak = *m.mem_used + (int64_t{m.rank} << 26);
  }
  return rows;
}

store::Alert alert(int64_t step, const std::string& rule, std::optional<int> rank, double value, double threshold,
                   const std::string& message) {
  store::Alert a;
  a.step = step;
  a.rule = rule;
  a.rank = rank;
  a.value = value;
  a.threshold = threshold;
  a.message = message;
  return a;
}

TEST(RanksBrowser, StragglerViewAndAlertsShowTheApisValues) {
  const std::string dir = fresh_dir("ranks_browser"), store = dir + "/runs.db";
  {
    store::RunWriter steady(store);
    steady.create_run(store::testing_util::run_info("steady"));
    for (int64_t step = 1; step <= 10; ++step) steady.log_metrics(step_rows(step, 1));
    steady.finish(store::RunStatus::Completed);
    steady.flush();
  }
  {
    // 300 ranks, rank 200 the slowest (its step time twice the others').
    store::RunWriter many(store);
    many.create_run(store::testing_util::run_info("many"));
    for (int64_t step = 1; step <= 3; ++step) {
      std::vector<store::MetricRow> rows = step_rows(step, 300);
      rows[200].fwd_ms *= 2;
      rows[200].bwd_ms *= 2;
      many.log_metrics(rows);
    }
    many.finish(store::RunStatus::Completed);
    many.flush();
  }
  // A wide run: 12 ranks a step (store/metric_spread.h), rank 5 the slowest in throughput
  // for its first 10 steps and rank 9 for those logged while the browser looks.
  store::RunWriter wide(store);
  wide.create_run(store::testing_util::run_info("wide"));
  int64_t wide_step = 0;
  const auto log_wide = [&](int slow_rank, double rate) {
    std::vector<store::MetricRow> rows = step_rows(++wide_step, 12);
    rows[static_cast<size_t>(slow_rank)].tokens_per_s = rate;
    wide.log_metrics(rows);
  };
  while (wide_step < 10) log_wide(5, 500);
  wide.flush();
  // A run that turns wide while its page is open (resumed on more ranks): 4 ranks a step
  // until the browser has drawn them and writes `turn`, then 12.
  store::RunWriter turning(store);
  turning.create_run(store::testing_util::run_info("turning"));
  const std::string turn = dir + "/turn-wide";
  int64_t turning_step = 0;
  const auto log_turning = [&] {
    turning.log_metrics(step_rows(++turning_step, std::filesystem::exists(turn) ? 12 : 4));
  };
  while (turning_step < 5) log_turning();
  turning.flush();
  store::RunWriter writer(store);
  writer.create_run(store::testing_util::run_info("straggler"));
  writer.record_ranks({{0, "gpu-node-a", "cuda:0", 4100}, {1, "gpu-node-a", "cuda:1", 4101},
                       {2, "gpu-node-b", "cuda:0", 4200}, {3, "gpu-node-b", "cuda:1", 4201}});
  int64_t step = 0;
  while (step < 60) writer.log_metrics(step_rows(++step, 4));
  writer.log_alert(alert(12, "loss_spike", std::nullopt, 4.1, 3, "loss 4.1 is 4.1 standard deviations above the last 50 steps' mean"));
  writer.log_alert(alert(29, "straggler", 3, 1.6, 1.2,
                         "rank 3 on gpu-node-b worked 1.60x the median rank's time for 5 steps"));
  writer.flush();

  const std::string serve_log = dir + "/serve.log";
  const int server = start_background(kiln + " serve --store " + store + " --listen 127.0.0.1:0", serve_log);
  const std::string url = wait_for_url(serve_log);
  ASSERT_FALSE(url.empty()) << read_text(serve_log);

  const std::string shots = (std::filesystem::path(KILN_BINARY).parent_path() / "screenshots" / "ranks").string();
  std::filesystem::create_directories(shots);
  const std::string browser_log = dir + "/browser.log";
  const int status = watch_browser("node " KILN_SOURCE_DIR "/tests/browser/ranks.mjs " + url + " straggler steady " + shots + " wide many turning " + turn,
                                   browser_log, [&] {
                                     writer.log_metrics(step_rows(++step, 4));
                                     log_wide(9, 400);
                                     log_turning();
                                   });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(browser_log);
  EXPECT_TRUE(std::filesystem::exists(shots + "/straggler-view.png"));

  wide.finish(store::RunStatus::Completed);
  wide.flush();
  turning.finish(store::RunStatus::Completed);
  turning.flush();
  finish_run_and_stop_server(writer, server, serve_log);
}

}  // namespace
}  // namespace kiln::test
