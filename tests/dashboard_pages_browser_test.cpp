// End-to-end: what the run, runs and compare pages tell a new user, in headless Chromium
// (tests/browser/pages.mjs) against `kiln train --serve` training a live run that samples at
// each validation, over a store that also holds two finished CPU runs with samples. Screenshots
// of the three pages land in build/screenshots/pages/ (scripts/refresh-screenshots.sh copies
// them into docs/images).
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <string>

#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

TEST(DashboardPagesBrowser, ProgressPanelsSamplesColumnsGroupsAndCompareGrid) {
  const std::string dir = fresh_dir("dashboard_pages_browser");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  // Two finished runs that differ in their learning rate and tags; small_run validates, and
  // samples, at steps 3 and 6, here after two prompts.
  const CommandResult sampled = run_command(kiln + " train --store " + store + " --name sampled --tag baseline" +
                                            small_run(prefix) + " --set 'train.sample_prompt=[\"Doc\", \"In\"]'");
  ASSERT_EQ(sampled.exit_code, 0) << sampled.output;
  const CommandResult faster = run_command(kiln + " train --store " + store + " --name faster --tag sweep" +
                                           small_run(prefix) + " --set train.lr=0.01");
  ASSERT_EQ(faster.exit_code, 0) << faster.output;
  // Trains until stopped, a step logged every few milliseconds, validating and sampling every 50.
  const std::string log = dir + "/live.log";
  const int pid = start_background(kiln + " train --store " + store + " --name live --serve 127.0.0.1:0" +
                                       small_run(prefix) + " --set train.steps=1000000 --set train.log_interval=5" +
                                       " --set train.eval_interval=50",
                                   log);
  const std::string url = wait_for_url(log);
  ASSERT_FALSE(url.empty()) << read_text(log);
  // Plans far faster than the runs train: a slowdown the pages mark once it lasts.
  store::open_store(store, store::Access::ReadWrite)->exec("UPDATE runs SET planned_step_s = 1e-7 WHERE name IN ('sampled', 'live')");

  const std::string shots =
      (std::filesystem::path(KILN_BINARY).parent_path() / "screenshots" / "pages").string();
  std::filesystem::create_directories(shots);
  const CommandResult browser = run_command("node " KILN_SOURCE_DIR "/tests/browser/pages.mjs " + url +
                                            " live sampled faster " + shots);
  EXPECT_EQ(browser.exit_code, 0) << browser.output;
  for (const char* page : {"runs", "run", "compare"})
    EXPECT_TRUE(std::filesystem::exists(shots + "/" + page + ".png")) << page;

  const CommandResult stop = run_command(kiln + " runs stop live --store " + store + " --wait 30");
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  if (stop.exit_code != 0) ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
}

}  // namespace
}  // namespace kiln::test
