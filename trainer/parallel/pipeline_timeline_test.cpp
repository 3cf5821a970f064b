// A pipeline's step played out from its schedules: Megatron's bubbles come out of 1F1B's and
// the interleaved schedule's own orders, and the check refuses, in one line naming the rank
// and the step, schedules that would hang or that NCCL would mismatch.
#include "trainer/parallel/pipeline_timeline.h"

#include <gtest/gtest.h>

#include "tests/error_of.h"

namespace kiln {
namespace {

using test::error_of;

TEST(PipelineTimeline, OneForwardOneBackwardIdlesInItsFillAndDrain) {
  EXPECT_DOUBLE_EQ(pipeline_bubble(1, 1, 8), 0.0);
  // (pp - 1) / (m + pp - 1): each rank waits pp - 1 forwards and backwards of a micro-batch.
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 1, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble(2, 1, 1), 0.5);
  // Played out, the first rank runs its 3 warm-up forwards, then waits for the backward of
  // micro-batch 0: three forwards and backwards of the other ranks (a backward costs two).
  std::vector<PipelineSchedule> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(pipeline_schedule(4, 1, r, 8));
  const PipelineTimeline t = play_pipeline(ranks, {4, 1, false}, 8);
  EXPECT_DOUBLE_EQ(t.step, 33.0);
  for (double busy : t.busy) EXPECT_DOUBLE_EQ(busy, 24.0);
}

TEST(PipelineTimeline, InterleavingShrinksTheBubbleByTheChunks) {
  // Megatron's (pp - 1) / (vpp m) of the ideal time, from the schedule: pp 4 x vpp 2 over 8.
  EXPECT_NEAR(pipeline_bubble(4, 2, 8), 3.0 / 19.0, 1e-12);
  EXPECT_LT(pipeline_bubble(4, 2, 8), pipeline_bubble(4, 1, 8));
}

TEST(PipelineTimeline, TheCheckRefusesWhatCannotRun) {
  const PipelinePass F = PipelinePass::Forward, B = PipelinePass::Backward;
  const PipelinePlacement two{2, 1, false};
  // Rank 1 starts with micro-batch 1, which rank 0 sends only after micro-batch 0's backward,
  // which waits for rank 1: a hang.
  const std::vector<PipelineSchedule> hangs = {{0, {{F, 0, 0}, {B, 0, 0}, {F, 1, 0}, {B, 1, 0}}},
                                               {0, {{F, 1, 0}, {B, 1, 0}, {F, 0, 0}, {B, 0, 0}}}};
  EXPECT_EQ(error_of([&] { check_pipeline_schedules(hangs, two, 2); }),
            "pipeline: the schedule cannot run: rank 0 step 1 (backward of micro-batch 0, chunk 0) waits for a "
            "step that never runs");
  // Both run to the end, but rank 1 takes the activations in the other order: NCCL, matching
  // by order, would hand micro-batch 1's to micro-batch 0.
  const std::vector<PipelineSchedule> crossed = {{0, {{F, 0, 0}, {F, 1, 0}, {B, 0, 0}, {B, 1, 0}}},
                                                 {0, {{F, 1, 0}, {B, 1, 0}, {F, 0, 0}, {B, 0, 0}}}};
  EXPECT_EQ(error_of([&] { check_pipeline_schedules(crossed, two, 2); }),
            "pipeline: the schedule cannot run: rank 0 sends its activations to rank 1 in an order rank 1 does not "
            "take them in");
  const std::vector<PipelineSchedule> twice = {{0, {{F, 0, 0}, {F, 0, 0}, {B, 0, 0}}}, {0, {{F, 0, 0}, {B, 0, 0}}}};
  EXPECT_EQ(error_of([&] { check_pipeline_schedules(twice, two, 1); }),
            "pipeline: the schedule cannot run: rank 0 step 1 (forward of micro-batch 0, chunk 0) is out of order or "
            "twice");
  const std::vector<PipelineSchedule> missing = {{0, {{F, 0, 0}, {B, 0, 0}}}, {0, {{F, 0, 0}}}};
  EXPECT_EQ(error_of([&] { check_pipeline_schedules(missing, two, 1); }),
            "pipeline: the schedule cannot run: virtual stage 1 of micro-batch 0 does not run its forward and its "
            "backward once");
}

}  // namespace
}  // namespace kiln
