// End-to-end: the run page's Experts panel in headless Chromium (tests/browser/experts.mjs)
// against `kiln serve`, over a store holding a dense run and a live mixture-of-experts run
// whose synthetic loads (tests/expert_loads_fixture.h) this test keeps logging while the
// browser looks. A screenshot of the panel lands in build/screenshots/experts/.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>

#include "store/run_writer.h"
#include "store/test_util.h"
#include "tests/browser_check.h"
#include "tests/expert_loads_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

// Logs `step` of a run: its metric row and, with `layers`, its expert loads.
void log_expert_step(store::RunWriter& writer, int64_t step, int layers) {
  writer.log_metrics(store::testing_util::interval(step, 1));
  if (layers > 0) writer.log_expert_loads(synthetic_expert_loads(step, layers, 8));
}

TEST(ExpertsBrowser, PanelShowsTheApisValuesAndGrowsLive) {
  const std::string dir = fresh_dir("experts_browser"), store = dir + "/runs.db";
  {
    store::RunWriter dense(store);
    dense.create_run(store::testing_util::run_info("dense"));
    for (int64_t step = 1; step <= 5; ++step) log_expert_step(dense, step, 0);
    dense.finish(store::RunStatus::Completed);
    dense.flush();
  }
  store::RunWriter writer(store);
  writer.create_run(store::testing_util::run_info("moe"));
  int64_t step = 0;
  while (step < 40) log_expert_step(writer, ++step, 4);
  writer.flush();

  const std::string serve_log = dir + "/serve.log";
  const int server = start_background(kiln + " serve --store " + store + " --listen 127.0.0.1:0", serve_log);
  const std::string url = wait_for_url(serve_log);
  ASSERT_FALSE(url.empty()) << read_text(serve_log);

  const std::string shots = (std::filesystem::path(KILN_BINARY).parent_path() / "screenshots" / "experts").string();
  std::filesystem::create_directories(shots);
  const std::string browser_log = dir + "/browser.log";
  // A step every 300 ms while the browser looks.
  const int status = watch_browser("node " KILN_SOURCE_DIR "/tests/browser/experts.mjs " + url + " moe dense " + shots,
                                   browser_log, [&] { log_expert_step(writer, ++step, 4); });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(browser_log);
  EXPECT_TRUE(std::filesystem::exists(shots + "/experts.png"));

  finish_run_and_stop_server(writer, server, serve_log);
}

}  // namespace
}  // namespace kiln::test
