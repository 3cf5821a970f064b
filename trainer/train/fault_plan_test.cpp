#include "trainer/train/fault_plan.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/check.h"

namespace kiln {
namespace {

std::string fault_error_of(std::string_view text) {
  try {
    FaultPlan::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FaultPlan, EveryKindOfFault) {
  FaultPlan plan =
      FaultPlan::parse("nan@9, spike@4x20,spike@5, slow@1:40, stall@6:2.5, throughput@7:50, checkpoint@4:30, "
                       "checkpoint-error@6:1");
  EXPECT_EQ(plan.describe(),
            "a NaN loss at step 9, the loss 20 times over at step 4, the loss 10 times over at step 5, rank 1 working "
            "40 ms longer every step, a stop of 2.5 s in step 6, every rank 50 ms slower a step from step 7, a stop "
            "of 30 s in writing the checkpoint of step 4, rank 1 failing with an error in the checkpoint of step 6");
  EXPECT_TRUE(std::isnan(plan.loss_at(9, 3.0)));
  EXPECT_DOUBLE_EQ(plan.loss_at(4, 3.0), 60);
  EXPECT_DOUBLE_EQ(plan.loss_at(5, 3.0), 30);
  EXPECT_DOUBLE_EQ(plan.loss_at(3, 3.0), 3);
  // A rewind trains step 4 again, on other data: the spike was the first training's.
  EXPECT_DOUBLE_EQ(plan.loss_at(4, 3.0), 3);
  EXPECT_TRUE(std::isnan(plan.loss_at(9, 3.0)));
  EXPECT_DOUBLE_EQ(plan.delay_ms(1, 0), 0);
  EXPECT_DOUBLE_EQ(plan.delay_ms(1, 1), 40);
  EXPECT_DOUBLE_EQ(plan.delay_ms(6, 0), 2500);
  EXPECT_DOUBLE_EQ(plan.delay_ms(8, 1), 90);
  EXPECT_DOUBLE_EQ(plan.delay_ms(4, 0), 0);  // the checkpoint's stop is not the step's
  EXPECT_DOUBLE_EQ(plan.checkpoint_pause_s(4), 30);
  EXPECT_DOUBLE_EQ(plan.checkpoint_pause_s(6), 0);
  EXPECT_TRUE(plan.fails_in_checkpoint(6, 1));
  EXPECT_FALSE(plan.fails_in_checkpoint(6, 0));
  EXPECT_FALSE(plan.fails_in_checkpoint(4, 1));
  EXPECT_DOUBLE_EQ(plan.delay_ms(6, 1), 2540);  // a failure, not a delay
}

TEST(FaultPlan, NoneIsEmpty) {
  EXPECT_TRUE(FaultPlan::parse("").empty());
  EXPECT_TRUE(FaultPlan::parse(" ").empty());
  FaultPlan none;
  EXPECT_DOUBLE_EQ(none.loss_at(1, 2.0), 2.0);
}

TEST(FaultPlan, BadItemsAreNamedInOneLine) {
  EXPECT_EQ(fault_error_of("nan@five"), "KILN_FAULTS: cannot read \"nan@five\"; write nan@STEP, e.g. nan@5");
  EXPECT_EQ(fault_error_of("nan@0"), "KILN_FAULTS: cannot read \"nan@0\"; write nan@STEP, e.g. nan@5");
  EXPECT_EQ(fault_error_of("slow@1"), "KILN_FAULTS: cannot read \"slow@1\"; write slow@RANK:MS, e.g. slow@1:40");
  EXPECT_EQ(fault_error_of("spike@3x-1"), "KILN_FAULTS: cannot read \"spike@3x-1\"; write spike@STEP[xFACTOR], e.g. spike@8x20");
  EXPECT_EQ(fault_error_of("stall@2:99999"),
            "KILN_FAULTS: cannot read \"stall@2:99999\"; write stall@STEP:SECONDS, e.g. stall@6:3");
  EXPECT_EQ(fault_error_of("checkpoint@4"),
            "KILN_FAULTS: cannot read \"checkpoint@4\"; write checkpoint@STEP:SECONDS, e.g. checkpoint@4:30");
  EXPECT_EQ(fault_error_of("checkpoint-error@4:-1"),
            "KILN_FAULTS: cannot read \"checkpoint-error@4:-1\"; write checkpoint-error@STEP:RANK, e.g. "
            "checkpoint-error@4:1");
  EXPECT_EQ(fault_error_of("nan@2,oom@3"),
            "KILN_FAULTS: unknown fault \"oom@3\" (nan@STEP, spike@STEP[xFACTOR], slow@RANK:MS, stall@STEP:SECONDS, "
            "throughput@STEP:MS, checkpoint@STEP:SECONDS, checkpoint-error@STEP:RANK)");
}

}  // namespace
}  // namespace kiln
