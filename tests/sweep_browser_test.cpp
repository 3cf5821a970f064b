// End-to-end: the dashboard's sweep page in headless Chromium (tests/browser/sweep.mjs)
// against `kiln serve`, over a store holding a live sweep of 6 points (train.lr x
// model.d_model) whose runs this test wrote with RunWriter: five finished, one still training
// (this test logs a step of it every 300 ms while the browser looks). Screenshots of the page
// land in build/screenshots/sweep/ (scripts/refresh-screenshots.sh copies one into docs/images).
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"
#include "tests/browser_check.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

constexpr double kLrs[] = {1e-4, 1e-3, 1e-2};
constexpr int kWidths[] = {64, 128};

// The point's loss at a step: lowest at lr 1e-3 and width 128 (point 3).
double loss_at(double lr, int width, int64_t step) {
  return 2.0 + 0.5 * std::abs(std::log10(lr) + 3) - (width == 128 ? 0.1 : 0) + 3.0 / static_cast<double>(step);
}

void log_step(store::RunWriter& writer, double lr, int width, int64_t step) {
  store::MetricRow row;
  row.step = step;
  row.loss = loss_at(lr, width, step);
  row.tokens_per_s = 1000.0 * 128 / width;
  writer.log_metrics({row});
  if (step % 10 == 0) writer.log_valid({step, 0, loss_at(lr, width, step) + 0.05});
}

TEST(SweepBrowser, PageTablesAndPlotsTheSweepsPointsAndFollowsItLive) {
  const std::string dir = fresh_dir("sweep_browser"), store = dir + "/runs.db";
  std::unique_ptr<store::RunWriter> live;
  double live_lr = 0;
  int live_width = 0;
  {
    auto db = store::open_store(store, store::Access::ReadWrite);
    db->exec("INSERT INTO sweeps (id, name, created_at, heartbeat_at, command_line, host) VALUES (1, 'lr-width', " +
             std::to_string(store::unix_now()) + ", " + std::to_string(store::unix_now() + 600) +
             ", 'kiln sweep --config base.json --grid train.lr=1e-4,1e-3,1e-2 --grid model.d_model=64,128', 'testhost')");
  }
  int point = 0;
  for (double lr : kLrs) {
    for (int width : kWidths) {
      const std::string name = "lr-width-" + std::to_string(point);
      {
        auto db = store::open_store(store, store::Access::ReadWrite);
        store::Statement st(*db, "INSERT INTO sweep_points (sweep_id, point, params_json, run_name) VALUES (1, ?, ?, ?)");
        char params[96];
        std::snprintf(params, sizeof params, R"({"train.lr":%g,"model.d_model":%d})", lr, width);
        st.bind_all(int64_t{point}, std::string(params), name);
        st.run();
      }
      auto writer = std::make_unique<store::RunWriter>(store);
      store::RunInfo info = store::testing_util::run_info(name);
      info.sweep_id = 1;
      info.sweep_point = point;
      writer->create_run(info);
      for (int64_t step = 1; step <= 20; ++step) log_step(*writer, lr, width, step);
      writer->flush();
      if (point == 5) {
        live = std::move(writer);
        live_lr = lr;
        live_width = width;
      } else {
        writer->finish(store::RunStatus::Completed);
        writer->flush();
      }
      ++point;
    }
  }

  const std::string serve_log = dir + "/serve.log";
  const int server = start_background(kiln + " serve --store " + store + " --listen 127.0.0.1:0", serve_log);
  const std::string url = wait_for_url(serve_log);
  ASSERT_FALSE(url.empty()) << read_text(serve_log);

  const std::string shots = (std::filesystem::path(KILN_BINARY).parent_path() / "screenshots" / "sweep").string();
  std::filesystem::create_directories(shots);
  const std::string browser_log = dir + "/browser.log";
  int64_t step = 20;
  const int status = watch_browser("node " KILN_SOURCE_DIR "/tests/browser/sweep.mjs " + url + " lr-width " + shots,
                                   browser_log, [&] {
                                     log_step(*live, live_lr, live_width, ++step);
                                     live->flush();
                                   });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(browser_log);
  EXPECT_TRUE(std::filesystem::exists(shots + "/sweep.png"));

  finish_run_and_stop_server(*live, server, serve_log);
}

}  // namespace
}  // namespace kiln::test
