#include "store/run_figures.h"

#include <gtest/gtest.h>

namespace kiln::store {
namespace {

// A run of two attempts: the first counted 100 s, the second started at t = 1000.
RunRecord restarted_run() {
  RunRecord run;
  run.status = RunStatus::Running;
  run.step_seconds = 90;
  run.counted_seconds = 100;
  run.attempt_started_at = 1000;
  return run;
}

TEST(Goodput, IsTheSurvivingStepsOverTheCountedWallClock) {
  RunRecord run = restarted_run();
  // Live: its attempt counts to now.
  EXPECT_DOUBLE_EQ(*goodput(run, 1050), 90.0 / 150);
  // Ended: to its end, whenever it is read.
  run.status = RunStatus::Completed;
  run.ended_at = 1020;
  EXPECT_DOUBLE_EQ(*goodput(run, 5000), 90.0 / 120);
  // Lost: to its last heartbeat.
  run.status = RunStatus::Lost;
  run.ended_at.reset();
  run.heartbeat_at = 1010;
  EXPECT_DOUBLE_EQ(*goodput(run, 5000), 90.0 / 110);
}

TEST(Goodput, IsUnknownWithoutItsParts) {
  RunRecord run = restarted_run();
  run.step_seconds.reset();  // no step logged yet, or a checkpoint that did not measure them
  EXPECT_FALSE(goodput(run, 1050).has_value());
  run = restarted_run();
  run.attempt_started_at.reset();  // recorded before schema 12
  EXPECT_FALSE(goodput(run, 1050).has_value());
  run = restarted_run();
  run.counted_seconds = 0;
  EXPECT_FALSE(goodput(run, 1000).has_value());  // no time has passed
}

}  // namespace
}  // namespace kiln::store
