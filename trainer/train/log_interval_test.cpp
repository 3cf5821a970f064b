// A log interval's means: its loss, exchange time and seconds per step without the time set aside.
#include "trainer/train/log_interval.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using std::chrono::milliseconds;

TEST(LogInterval, MeansLeaveOutTheTimeSetAside) {
  const Clock::time_point start{};
  LogInterval interval;
  interval.open(start);
  const double first_depths[] = {2.5, 3.5}, second_depths[] = {4.5, 6.5};
  interval.add_step(2.0, 1.0, first_depths);
  interval.add_step(4.0, 3.0, second_depths);
  interval.set_aside(0.5);
  const IntervalMeans means = interval.close(start + milliseconds(1500));
  EXPECT_DOUBLE_EQ(means.loss, 3.0);
  EXPECT_EQ(means.mtp_losses, (std::vector<double>{3.5, 5.0}));  // each depth's mean
  EXPECT_DOUBLE_EQ(means.exchange_ms, 2.0);
  EXPECT_DOUBLE_EQ(means.seconds_per_step, 0.5);  // (1.5 s - 0.5 s aside) / 2 steps
}

TEST(LogInterval, TheNextIntervalStartsWhereTheLastClosed) {
  const Clock::time_point start{};
  LogInterval interval;
  interval.open(start);
  interval.add_step(1.0, 0.0);
  interval.set_aside(0.25);
  interval.close(start + milliseconds(1000));
  interval.add_step(5.0, 0.0);
  const IntervalMeans means = interval.close(start + milliseconds(1200));
  EXPECT_DOUBLE_EQ(means.loss, 5.0);
  EXPECT_TRUE(means.mtp_losses.empty());
  EXPECT_NEAR(means.seconds_per_step, 0.2, 1e-12);  // nothing aside carried over
}

}  // namespace
}  // namespace kiln
