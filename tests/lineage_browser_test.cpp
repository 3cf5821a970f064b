// End-to-end: a fork's lineage and the Release button in headless Chromium
// (tests/browser/lineage.mjs) against `kiln serve`, over a store with a run, a fork of it at
// step 8 with another learning rate, and a live run the page releases. The fork's page lands in
// build/screenshots/lineage.png (scripts/refresh-screenshots.sh copies it into docs/images).
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <string>

#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

TEST(LineageBrowser, AForkDrawsItsParentsCurveAndReleaseEndsALiveRun) {
  const std::string dir = fresh_dir("lineage_browser");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const std::string steady = small_run(prefix) +
                             " --set train.log_interval=1 --set train.eval_interval=0 --set train.sample_tokens=0"
                             " --set train.decay=constant --set train.warmup=0 --set train.checkpoint_dir=" +
                             dir + "/checkpoints";
  const CommandResult parent = run_command(kiln + " train --store " + store + " --name base" + steady +
                                           " --set train.steps=16 --set train.checkpoint_interval=4");
  ASSERT_EQ(parent.exit_code, 0) << parent.output;
  const CommandResult fork =
      run_command(kiln + " runs fork base --step 9 --name lower-lr --set train.lr=0.0003 --store " + store);
  ASSERT_EQ(fork.exit_code, 0) << fork.output;
  const std::string live_log = dir + "/live.log";
  const int live = start_background(kiln + " train --store " + store + " --name live" + steady +
                                        " --set train.steps=1000000",
                                    live_log);
  ASSERT_TRUE(wait_for_step_after(store, "live", 1)) << read_text(live_log);

  const std::string serve_log = dir + "/serve.log";
  const int server = start_background(kiln + " serve --store " + store + " --listen 127.0.0.1:0", serve_log);
  const std::string url = wait_for_url(serve_log);
  ASSERT_FALSE(url.empty()) << read_text(serve_log);
  const std::string shots = (std::filesystem::path(KILN_BINARY).parent_path() / "screenshots").string();
  std::filesystem::create_directories(shots);
  const CommandResult browser = run_command("node " KILN_SOURCE_DIR "/tests/browser/lineage.mjs " + url +
                                            " base lower-lr live " + shots);
  EXPECT_EQ(browser.exit_code, 0) << browser.output;
  EXPECT_TRUE(std::filesystem::exists(shots + "/lineage.png"));
  if (browser.exit_code != 0) ::kill(live, SIGKILL);
  EXPECT_EQ(wait_exit(live), 0) << read_text(live_log);
  ::kill(server, SIGTERM);
  wait_exit(server);
  auto db = store::open_store(store, store::Access::ReadOnly);
  EXPECT_EQ(store::get_run(*db, store::resolve_run(*db, "live")).status, store::RunStatus::Released);
}

}  // namespace
}  // namespace kiln::test
