// End-to-end: the dashboard of `kiln train --serve --token-file` in headless Chromium
// (tests/browser/token.mjs). The server answers no read without the token; the page asks for
// it once, then shows the runs table and the live run's chart over the WebSocket, and its
// Pause button still goes with the token.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

TEST(TokenBrowser, TheDashboardAsksForTheTokenThenShowsRunsAndLiveData) {
  const std::string dir = fresh_dir("token_browser");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const std::string token = "browser-t0ken";
  std::ofstream(dir + "/token") << token << "\n";
  const std::string log = dir + "/live.log";
  const int pid = start_background("env -u KILN_TOKEN " + kiln + " train --store " + store +
                                       " --name live --serve 127.0.0.1:0 --token-file " + dir + "/token" +
                                       small_run(prefix) + " --set train.steps=1000000 --set train.log_interval=5" +
                                       " --set train.eval_interval=0",
                                   log);
  const std::string url = wait_for_url(log);
  ASSERT_FALSE(url.empty()) << read_text(log);

  const CommandResult browser =
      run_command("node " KILN_SOURCE_DIR "/tests/browser/token.mjs " + url + " " + token + " live");
  EXPECT_EQ(browser.exit_code, 0) << browser.output;

  const CommandResult stop = run_command(kiln + " runs stop live --store " + store + " --wait 30");
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  if (stop.exit_code != 0) ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
}

}  // namespace
}  // namespace kiln::test
