#include "trainer/optim/loss_scaler.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(LossScaler, HalvesOnOverflowAndGrowsAfterTheWindow) {
  LossScaler s = LossScaler::dynamic(1024.0, 3);
  s.update(true);
  EXPECT_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 512.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024.0);
  s.update(false);
  s.update(true);  // an overflow restarts the window
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 512.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(LossScaler, NeverBelowOne) {
  LossScaler s = LossScaler::dynamic(2.0, 10);
  for (int i = 0; i < 5; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 1.0);
}

TEST(LossScaler, NoneStaysAtOneButCountsSkips) {
  LossScaler s = LossScaler::none();
  s.update(true);
  for (int i = 0; i < 5000; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.skipped_steps(), 1);
}

}  // namespace
}  // namespace kiln
