#include "launch/sweep_points.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_files.h"
#include "tests/error_of.h"

namespace kiln::launch {
namespace {

namespace fs = std::filesystem;
using test::error_of;

using kiln::test::fresh_dir;
using kiln::test::text_of;

// A stand-in for the kiln binary: writes its arguments and GPUs to its log, takes a moment,
// and exits with the number after --exit.
std::string fake_kiln(const std::string& dir) {
  const std::string path = dir + "/kiln";
  std::ofstream(path) << "#!/bin/sh\n"
                         "echo \"$@\"; echo \"gpus=$CUDA_VISIBLE_DEVICES\"; sleep 0.2\n"
                         "while [ $# -gt 0 ]; do [ \"$1\" = --exit ] && exit \"$2\"; shift; done\n";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

class ScopedVisibleDevices {
 public:
  explicit ScopedVisibleDevices(const char* value) {
    if (const char* old = std::getenv("CUDA_VISIBLE_DEVICES")) old_ = old;
    if (value) setenv("CUDA_VISIBLE_DEVICES", value, 1);
    else unsetenv("CUDA_VISIBLE_DEVICES");
  }
  ~ScopedVisibleDevices() {
    if (old_) setenv("CUDA_VISIBLE_DEVICES", old_->c_str(), 1);
    else unsetenv("CUDA_VISIBLE_DEVICES");
  }

 private:
  std::optional<std::string> old_;
};

TEST(SplitDevices, TheVisibleGpusSplitEvenlyAmongTheSlots) {
  {
    const ScopedVisibleDevices none(nullptr);
    EXPECT_EQ(split_devices(4, 2), (std::vector<std::string>{"0,1", "2,3"}));
    EXPECT_EQ(split_devices(3, 2), (std::vector<std::string>{"0,1", "2"}));
    EXPECT_EQ(split_devices(2, 1), (std::vector<std::string>{"0,1"}));
  }
  const ScopedVisibleDevices some("5,7");
  EXPECT_EQ(split_devices(2, 2), (std::vector<std::string>{"5", "7"}));
  EXPECT_EQ(error_of([] { split_devices(1, 2); }),
            "sweep: --parallel 2 needs a GPU for each point at a time, and 1 is visible; give --parallel 1 or less");
  EXPECT_EQ(error_of([] { split_devices(0, 1); }),
            "sweep: --parallel 1 needs a GPU for each point at a time, and 0 are visible; give --parallel 1 or less");
}

TEST(RunSweepTasks, RunsEachPointKAtATimeWithItsRanksGpusAndLog) {
  const std::string dir = fresh_dir("k_at_a_time");
  std::vector<SweepTask> tasks;
  for (int p = 0; p < 3; ++p) {
    const std::string name = "s-" + std::to_string(p);
    tasks.push_back({p, name, "", {"--name", name, "--exit", std::to_string(p)}, dir + "/" + name + ".log"});
  }
  const SweepSlots slots{2, 2, {"0", "1"}};
  std::vector<std::string> events;
  int running = 0, most = 0;
  const SweepOutcome outcome = run_sweep_tasks(
      fake_kiln(dir), tasks, slots,
      [&](const SweepTask& task) {
        events.push_back("launch " + task.run_name);
        most = std::max(most, ++running);
      },
      [&](const SweepTask& task, int exit_status) {
        events.push_back("finish " + task.run_name + " " + std::to_string(exit_status));
        --running;
      });
  EXPECT_EQ(outcome.launched, 3);
  EXPECT_EQ(outcome.finished, 3);
  EXPECT_FALSE(outcome.interrupted);
  EXPECT_EQ(most, 2);
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0], "launch s-0");
  EXPECT_EQ(events[1], "launch s-1");
  EXPECT_EQ(events.back().substr(0, 10), "finish s-2");
  for (const std::string& e : events) {
    if (e.starts_with("finish s-1")) {
      EXPECT_EQ(e, "finish s-1 1");
    }
  }
  EXPECT_EQ(text_of(dir + "/s-0.log"), "train --name s-0 --exit 0 --ranks 2\ngpus=0\n");
  EXPECT_EQ(text_of(dir + "/s-1.log"), "train --name s-1 --exit 1 --ranks 2\ngpus=1\n");
  // The third takes the slot the first point to end gave back.
  const std::string third = text_of(dir + "/s-2.log");
  EXPECT_TRUE(third == "train --name s-2 --exit 2 --ranks 2\ngpus=0\n" ||
              third == "train --name s-2 --exit 2 --ranks 2\ngpus=1\n")
      << third;
}

TEST(RunSweepTasks, APointThatCannotStartNamesThePoint) {
  const std::string dir = fresh_dir("cannot_start");
  std::ofstream(dir + "/elsewhere") << "someone else's\n";
  fs::create_symlink(dir + "/elsewhere", dir + "/p.log");
  const std::vector<SweepTask> tasks = {{4, "p", "", {}, dir + "/p.log"}};
  EXPECT_EQ(error_of([&] { run_sweep_tasks(fake_kiln(dir), tasks, {}, [](const SweepTask&) {}, [](const SweepTask&, int) {}); }),
            "sweep: point 4: log " + dir + "/p.log is a symbolic link; kiln does not follow it");
  EXPECT_EQ(text_of(dir + "/elsewhere"), "someone else's\n");
}

}  // namespace
}  // namespace kiln::launch
