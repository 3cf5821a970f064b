// The server's threads: named for top and ps, and beside a training run lowered to the
// lowest CPU priority so they never hold up the run's threads (bench/README.md, "Dashboard
// under load").
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "monitor/server/server_fixture.h"

namespace kiln::monitor::test {
namespace {

// The nice value of each of this process's threads named `name`, from /proc.
std::vector<int> nice_of_threads_named(const std::string& name) {
  std::vector<int> nices;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm != name) continue;
    std::stringstream stat;
    stat << std::ifstream(task.path() / "stat").rdbuf();
    // After the command in parentheses come the fields from the state (3rd) on; nice is
    // the 19th.
    std::istringstream fields(stat.str().substr(stat.str().rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19; ++i) fields >> field;
    nices.push_back(std::stoi(field));
  }
  return nices;
}

// The same once both server threads have started and named themselves (start() returns as
// soon as they are created).
std::vector<int> nice_of_server_threads() {
  std::vector<int> nices;
  for (int tries = 0; tries < 200 && nices.size() < 2; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    nices = nice_of_threads_named("kiln-server");
  }
  return nices;
}

TEST_F(ServerTest, ThreadsAreNamedAndKeepTheProcessPriority) {
  const int process_nice = getpriority(PRIO_PROCESS, 0);
  EXPECT_EQ(nice_of_server_threads(), (std::vector<int>{process_nice, process_nice}));
}

class ServerBesideTraining : public ServerTest {
  void configure(ServerOptions& options) override { options.beside_training = true; }
};

TEST_F(ServerBesideTraining, ThreadsRunAtTheLowestPriority) {
  EXPECT_EQ(nice_of_server_threads(), (std::vector<int>{19, 19}));
  // The rest of the process (here the test; in kiln train, the run) keeps its priority.
  EXPECT_LT(getpriority(PRIO_PROCESS, 0), 19);
}

}  // namespace
}  // namespace kiln::monitor::test
