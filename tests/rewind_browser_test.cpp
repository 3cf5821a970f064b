// End-to-end: a live run's rewind past a loss spike on its page in headless Chromium
// (tests/browser/rewind.mjs) against `kiln serve`. The store is written here: a run logs 20
// steps, its loss spiking at step 18; once the page shows them (the script says so with a
// file), the run rewinds to step 15 and logs the steps after it again, lower. The loss chart
// must then draw the abandoned steps dimmed, mark the rewind, and carry the new steps on its
// own line. A screenshot lands in build/screenshots/rewind/.
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

std::vector<store::MetricRow> rank0_row(int64_t step, double loss) {
  std::vector<store::MetricRow> rows = store::testing_util::interval(step, 1);
  rows[0].loss = loss;
  return rows;
}

TEST(RewindBrowser, ARewindReloadsTheLossChartWithTheAbandonedStepsDimmed) {
  const std::string dir = fresh_dir("rewind_browser"), store = dir + "/runs.db";
  store::RunWriter writer(store);
  writer.create_run(store::testing_util::run_info("spiky"));
  for (int64_t step = 1; step <= 20; ++step) writer.log_metrics(rank0_row(step, step == 18 ? 50 : 4.0 - 0.1 * step));
  writer.flush();

  const std::string serve_log = dir + "/serve.log";
  const int server = start_background(kiln + " serve --store " + store + " --listen 127.0.0.1:0", serve_log);
  const std::string url = wait_for_url(serve_log);
  ASSERT_FALSE(url.empty()) << read_text(serve_log);

  const std::string shots = (std::filesystem::path(KILN_BINARY).parent_path() / "screenshots" / "rewind").string();
  std::filesystem::create_directories(shots);
  const std::string ready = dir + "/page-ready", browser_log = dir + "/browser.log";
  bool rewound = false;
  int64_t step = 15;
  const int status = watch_browser(
      "node " KILN_SOURCE_DIR "/tests/browser/rewind.mjs " + url + " spiky " + ready + " " + shots, browser_log, [&] {
        if (!std::filesystem::exists(ready)) return;
        if (!rewound) {
          store::Rewind back;
          back.number = 1;
          back.spike_step = 18;
          back.from_step = 20;
          back.to_step = 15;
          back.checkpoint = dir + "/checkpoints/spiky/step-00000015";
          back.first_skipped_batch = 16;
          back.skipped_batches = 200;
          back.message = "from step 20 back to step 15 past the loss spike at step 18, skipping batches 16-215 of "
                         "the data; rewind 1 of 3";
          writer.log_rewind(back);
          rewound = true;
        } else if (step < 30) {
          writer.log_metrics(rank0_row(++step, 0.05));
        }
      });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(browser_log);
  EXPECT_TRUE(rewound) << read_text(browser_log);
  EXPECT_TRUE(std::filesystem::exists(shots + "/rewind.png"));

  finish_run_and_stop_server(writer, server, serve_log);
}

}  // namespace
}  // namespace kiln::test
