#include "launch/sweep_run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/schema.h"
#include "store/sweep_writer.h"
#include "store/test_util.h"

namespace kiln::launch {
namespace {

namespace fs = std::filesystem;
using store::testing_util::error_of;

class SweepRunTest : public store::testing_util::StoreTest {
 protected:
  // A stand-in for the kiln binary that exits with the number after --exit.
  std::string fake_kiln() const {
    const std::string path = (dir_ / "kiln").string();
    std::ofstream(path) << "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --exit ] && exit \"$2\"; shift; done\n";
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }

  int64_t new_sweep(store::Database& db, int points) const {
    store::NewSweep sweep{"lr", "{}", "kiln sweep", dir_.string(), "here", 1, {}};
    for (int p = 0; p < points; ++p) sweep.points.push_back("{\"train.lr\": " + std::to_string(p) + "}");
    return store::create_sweep(db, sweep);
  }

  SweepTask task(int64_t point, int exit_status) const {
    const std::string name = "lr-" + std::to_string(point);
    return {point, name, "", {"--exit", std::to_string(exit_status)}, (dir_ / (name + ".log")).string()};
  }
};

TEST_F(SweepRunTest, RecordsEachPointsRunAsItLaunchesCountsFailuresAndEndsTheSweep) {
  auto db = store::open_store(path(), store::Access::ReadWrite);
  const int64_t id = new_sweep(*db, 2);
  std::vector<std::string> heard;
  SweepListener listener;
  listener.launching = [&](const SweepTask& t) {
    heard.push_back("launch " + t.run_name + " recorded " +
                    db->query_text("SELECT run_name FROM sweep_points WHERE point = " + std::to_string(t.point)));
  };
  listener.finished = [&](const PointEnd& end) {
    heard.push_back("finish " + end.task.run_name + " exit " + std::to_string(end.exit_status) +
                    (end.run ? " with a run" : " without a run"));
    EXPECT_GE(end.seconds, 0.0);
  };
  const SweepResult result = run_sweep(fake_kiln(), *db, id, {task(0, 0), task(1, 3)}, {}, listener);
  EXPECT_EQ(heard, (std::vector<std::string>{"launch lr-0 recorded lr-0", "finish lr-0 exit 0 without a run",
                                             "launch lr-1 recorded lr-1", "finish lr-1 exit 3 without a run"}));
  EXPECT_EQ(result.launched, 2);
  EXPECT_EQ(result.failures, 1);
  EXPECT_FALSE(result.interrupted);
  EXPECT_EQ(db->query_text("SELECT status FROM sweeps"), "ended");
}

TEST_F(SweepRunTest, APointThatCannotStartLeavesTheSweepInterrupted) {
  auto db = store::open_store(path(), store::Access::ReadWrite);
  const int64_t id = new_sweep(*db, 1);
  const SweepTask bad = task(0, 0);
  fs::create_symlink(dir_ / "elsewhere", bad.log_path);
  SweepListener listener{[](const SweepTask&) {}, [](const PointEnd&) {}};
  EXPECT_EQ(error_of([&] { run_sweep(fake_kiln(), *db, id, {bad}, {}, listener); }),
            "sweep: point 0: log " + bad.log_path + " is a symbolic link; kiln does not follow it");
  EXPECT_EQ(db->query_text("SELECT status FROM sweeps"), "interrupted");
}

}  // namespace
}  // namespace kiln::launch
