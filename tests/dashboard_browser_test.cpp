// End-to-end: the dashboard in headless Chromium (tests/browser/dashboard.mjs) against
// `kiln train --serve` training a live run, over a store that also holds two finished runs:
// its charts, and its steering buttons (pause, resume, set the learning rate, checkpoint)
// through the server's cross-site checks.
// Screenshots of the runs, run, live and compare pages land in build/screenshots/.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

TEST(DashboardBrowser, RunsChartControlsLiveSteeringAndCompare) {
  const std::string dir = fresh_dir("dashboard_browser");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  // finished-a: two data-parallel ranks, every step logged, a checkpoint at step 6 (and 12),
  // for the run page's bands, x axes and event marks.
  const CommandResult a = run_command(mpirun_command(2) + kiln + " train --store " + store + " --name finished-a" +
                                      small_run(prefix) + " --set train.global_batch=8 --set train.steps=12" +
                                      " --set train.log_interval=1 --set train.checkpoint_interval=6" +
                                      " --set train.checkpoint_dir=" + dir + "/checkpoints");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const CommandResult b = run_command(kiln + " train --store " + store + " --name finished-b" + small_run(prefix) +
                                      " --set train.lr=0.01");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  // Trains until stopped, a step logged every few milliseconds; the page's buttons steer it
  // (its checkpoint lands beside the others).
  const std::string log = dir + "/live.log";
  const int pid = start_background(kiln + " train --store " + store + " --name live --serve 127.0.0.1:0" +
                                       small_run(prefix) + " --set train.steps=1000000 --set train.log_interval=5" +
                                       " --set train.eval_interval=0 --set train.checkpoint_dir=" + dir + "/checkpoints",
                                   log);
  const std::string url = wait_for_url(log);
  ASSERT_FALSE(url.empty()) << read_text(log);

  const std::string shots = (std::filesystem::path(KILN_BINARY).parent_path() / "screenshots").string();
  std::filesystem::create_directories(shots);
  const CommandResult browser = run_command("node " KILN_SOURCE_DIR "/tests/browser/dashboard.mjs " + url +
                                            " live finished-a finished-b " + shots);
  EXPECT_EQ(browser.exit_code, 0) << browser.output;
  for (const char* page : {"runs", "run-bands", "live", "compare", "compare-other-scheme"})
    EXPECT_TRUE(std::filesystem::exists(shots + "/" + page + ".png")) << page;

  const CommandResult stop = run_command(kiln + " runs stop live --store " + store + " --wait 30");
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  if (stop.exit_code != 0) ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
}

}  // namespace
}  // namespace kiln::test
