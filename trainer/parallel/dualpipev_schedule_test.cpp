// DualPipeV's programs for every pp 2..8 and 2 pp..16 micro-batches (or 2 pp, past 8) pass the
// check a schedule passes before it runs, hold at most pp + 1 micro-batches' activations (the
// DualPipe paper's figure for DualPipeV), and idle less than 1F1B over the same micro-batches.
#include "trainer/parallel/dualpipev_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/error_of.h"
#include "trainer/parallel/pipeline_timeline.h"
#include "trainer/parallel/zero_bubble_schedule.h"

namespace kiln {
namespace {

using test::error_of;

TEST(DualPipeVSchedule, EveryProgramPassesTheCheckAndHoldsAtMostPpPlusOneMicroBatches) {
  for (int pp = 2; pp <= 8; ++pp)
    for (int m = 2 * pp; m <= std::max(16, 2 * pp); ++m) {
      const std::vector<PipelineSchedule> ranks = dualpipev_schedules(pp, m);
      EXPECT_EQ(error_of([&] { check_pipeline_schedules(ranks, zero_bubble_placement(ZeroBubble::V, pp), m); }),
                "(no error)")
          << "pp " << pp << ", " << m << " micro-batches";
      // A micro-batch is two chunks on every rank.
      for (int r = 0; r < pp; ++r)
        EXPECT_LE(most_chunks_held(ranks[static_cast<size_t>(r)]), 2 * (pp + 1))
            << "rank " << r << " of pp " << pp << ", " << m << " micro-batches";
    }
}

TEST(DualPipeVSchedule, FewerThanTwicePpMicroBatchesAreRefusedInOneLine) {
  EXPECT_EQ(error_of([] { dualpipev_schedules(4, 7); }),
            "pipeline: dualpipev needs pp >= 2 and at least 2 pp micro-batches (here pp=4, 7 micro-batches); use "
            "more micro-batches (train.global_batch) or zbv");
}

TEST(DualPipeVSchedule, IdlesLessThanOneFOneB) {
  for (int pp : {2, 4, 8})
    for (int m : {2 * pp, 4 * pp}) {
      const double dualpipev =
          play_pipeline(dualpipev_schedules(pp, m), zero_bubble_placement(ZeroBubble::V, pp), m).bubble();
      EXPECT_LT(dualpipev, pipeline_bubble(pp, 1, m)) << "pp " << pp << ", " << m << " micro-batches";
    }
}

TEST(DualPipeVSchedule, TheFirstRankOfTwoRunsItsEightPhases) {
  // pp 2, 4 micro-batches, rank 0 (stages 0 and 3): two forwards of chunk 0; a forward of
  // each chunk; chunk 1's input gradient, its weights', a forward; the main step's four; the
  // last backward of chunk 1 with a forward and a backward; two backwards, the second's
  // weights left; the last weight gradient and chunk 0's input gradient; the last weights.
  const PipelinePass F = PipelinePass::Forward, B = PipelinePass::Backward, I = PipelinePass::InputGradient,
                     W = PipelinePass::WeightGradient;
  const PipelineSchedule first = dualpipev_schedules(2, 4)[0];
  EXPECT_EQ(first.steps, (std::vector<PipelineStep>{{F, 0, 0}, {F, 1, 0}, {F, 2, 0}, {F, 0, 1}, {I, 0, 1},
                                                    {W, 0, 1}, {F, 1, 1}, {F, 3, 0}, {B, 1, 1}, {F, 2, 1},
                                                    {B, 0, 0}, {B, 2, 1}, {F, 3, 1}, {B, 1, 0}, {B, 3, 1},
                                                    {I, 2, 0}, {W, 2, 0}, {I, 3, 0}, {W, 3, 0}}));
  EXPECT_EQ(first.warmup, 4);
}

}  // namespace
}  // namespace kiln
