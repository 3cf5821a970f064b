// End-to-end: a dashboard over two stores in headless Chromium (tests/browser/stores.mjs)
// against `kiln serve --store A --store B`, B holding a run of A's name and a live run: the
// runs table's Store column and read-only rows, the live run followed with its buttons
// disabled, and the two runs of one name compared (docs/dashboard.md#several-stores).
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "store/commands.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

TEST(MultiStoreBrowser, ShowsAReadOnlyStoresRunsFollowedButNotSteered) {
  const std::string dir = fresh_dir("multi_store_browser");
  const std::string prefix = prepare_corpus(dir), a = dir + "/host-a.db", b = dir + "/host-b.db";
  const std::string quiet = small_run(prefix) + " --set train.eval_interval=0 --set train.sample_tokens=0";
  for (const std::string& store : {a, b}) {
    const CommandResult base = run_command(kiln + " train --store " + store + " --name base" + quiet);
    ASSERT_EQ(base.exit_code, 0) << base.output;
  }
  const std::string live_log = dir + "/remote.log";
  const int live = start_background(kiln + " train --store " + b + " --name remote" + quiet +
                                        " --set train.log_interval=1 --set train.steps=1000000",
                                    live_log);
  ASSERT_TRUE(wait_for_step_after(b, "remote", 1)) << read_text(live_log);

  const std::string serve_log = dir + "/serve.log";
  const int server =
      start_background(kiln + " serve --store " + a + " --store " + b + " --listen 127.0.0.1:0", serve_log);
  const std::string url = wait_for_url(serve_log);
  ASSERT_FALSE(url.empty()) << read_text(serve_log);
  const CommandResult browser = run_command("node " KILN_SOURCE_DIR "/tests/browser/stores.mjs " + url);
  EXPECT_EQ(browser.exit_code, 0) << browser.output;

  // The server asked nothing of the live run: no command reached its store.
  {
    auto db = store::open_store(b, store::Access::ReadOnly);
    EXPECT_TRUE(store::list_commands(*db, store::resolve_run(*db, "remote")).empty());
  }
  const CommandResult stop = run_command(kiln + " runs stop remote --store " + b);
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_EQ(wait_exit(live), 0) << read_text(live_log);
  ::kill(server, SIGINT);
  EXPECT_EQ(wait_exit(server), 0) << read_text(serve_log);
}

}  // namespace
}  // namespace kiln::test
