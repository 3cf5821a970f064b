#include "trainer/plan/checkpoint_interval.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/check.h"

namespace kiln {
namespace {

TEST(CheckpointInterval, FollowsDalysFirstOrder) {
  // A 30 s checkpoint and a failure a day: sqrt(2 x 30 x 86400) - 30 = 2246.8 s, in 2 s steps.
  const CheckpointInterval c = checkpoint_interval(30, 86400, 2);
  EXPECT_EQ(c.steps, 1123);
  EXPECT_DOUBLE_EQ(c.interval_s, 2246);
  EXPECT_DOUBLE_EQ(c.checkpoint_share, 30.0 / 2276);
  EXPECT_DOUBLE_EQ(c.lost_share, 2276.0 / (2 * 86400));
  EXPECT_NEAR(c.goodput, 1 - 0.013181 - 0.013171, 1e-5);
}

TEST(CheckpointInterval, TheOptimumLosesLeast) {
  const CheckpointInterval best = checkpoint_interval(30, 3600 * 6, 1);
  // Either side of it, the two losses add to more.
  for (const double factor : {0.5, 2.0}) {
    const double interval = best.interval_s * factor, segment = interval + 30;
    EXPECT_GT(30 / segment + segment / (2 * 3600 * 6), best.checkpoint_share + best.lost_share) << factor;
  }
}

TEST(CheckpointInterval, ACheckpointDearerThanHalfTheMtbfCheckpointsEveryStep) {
  const CheckpointInterval c = checkpoint_interval(600, 1000, 5);
  EXPECT_EQ(c.steps, 1);
  EXPECT_GE(c.goodput, 0);
}

TEST(CheckpointInterval, RefusesWhatIsNotATime) {
  try {
    checkpoint_interval(30, 0, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the MTBF must be a positive number of seconds, not 0");
  }
  EXPECT_THROW(checkpoint_interval(NAN, 10, 1), Error);
  EXPECT_THROW(checkpoint_interval(1, 10, -1), Error);
}

}  // namespace
}  // namespace kiln
