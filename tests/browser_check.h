// A browser check (a tests/browser/*.mjs script under node) run in the background while the
// test keeps a live run logging, and the end those tests share.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "store/run_writer.h"
#include "tests/run_command.h"

namespace kiln::test {

// `tick` every 300 ms until the script exits, for at most two minutes. Returns the script's
// wait status; a check that outlives the limit is killed and reported as a test failure.
inline int watch_browser(const std::string& command, const std::string& log_path, const std::function<void()>& tick) {
  const int browser = start_background(command, log_path);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (::waitpid(browser, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(browser, SIGKILL);
      ::waitpid(browser, &status, 0);
      ADD_FAILURE() << "the browser check took over two minutes";
      break;
    }
    tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return status;
}

// The live run completes with its rows on disk, then the server (`kiln serve` in the
// background) must stop cleanly on SIGINT.
inline void finish_run_and_stop_server(store::RunWriter& writer, int server, const std::string& serve_log) {
  writer.finish(store::RunStatus::Completed);
  writer.flush();
  ::kill(server, SIGINT);
  EXPECT_EQ(wait_exit(server), 0) << read_text(serve_log);
}

}  // namespace kiln::test
