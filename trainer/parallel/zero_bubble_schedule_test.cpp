// The zero-bubble schedules made for every pp 2..8 and 1..16 micro-batches pass the check a
// schedule passes before it runs, hold no more activations than their limits, and idle less
// than 1F1B over the same micro-batches.
#include "trainer/parallel/zero_bubble_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/error_of.h"
#include "trainer/parallel/pipeline_timeline.h"

namespace kiln {
namespace {

using test::error_of;

double bubble(ZeroBubble kind, int pp, int m) {
  return play_pipeline(zero_bubble_schedules(kind, pp, m), zero_bubble_placement(kind, pp), m).bubble();
}

TEST(ZeroBubbleSchedule, EveryScheduleMadePassesTheCheck) {
  for (ZeroBubble kind : {ZeroBubble::H1, ZeroBubble::V})
    for (int pp = 2; pp <= 8; ++pp)
      for (int m = 1; m <= 16; ++m) {
        const std::vector<PipelineSchedule> ranks = zero_bubble_schedules(kind, pp, m);
        EXPECT_EQ(error_of([&] { check_pipeline_schedules(ranks, zero_bubble_placement(kind, pp), m); }), "(no error)")
            << (kind == ZeroBubble::H1 ? "zb-h1" : "zbv") << " pp " << pp << ", " << m << " micro-batches";
        for (int r = 0; r < pp; ++r)
          EXPECT_LE(most_chunks_held(ranks[static_cast<size_t>(r)]), kind == ZeroBubble::H1 ? pp - r : 2 * pp)
              << "rank " << r << " of pp " << pp << ", " << m << " micro-batches";
      }
}

TEST(ZeroBubbleSchedule, TheWeightGradientsFillTheBubble) {
  for (int pp : {2, 4, 8})
    for (int m : {pp, 2 * pp, 4 * pp}) {
      const double one_f_one_b = pipeline_bubble(pp, 1, m);
      EXPECT_LT(bubble(ZeroBubble::H1, pp, m), one_f_one_b) << "zb-h1 pp " << pp << ", " << m;
      EXPECT_LT(bubble(ZeroBubble::V, pp, m), bubble(ZeroBubble::H1, pp, m)) << "zbv pp " << pp << ", " << m;
    }
}

TEST(ZeroBubbleSchedule, TheLastRankOfZbH1RunsForwardInputWeight) {
  // Holding one micro-batch at a time, the last rank frees each before the next.
  const PipelineSchedule last = zero_bubble_schedules(ZeroBubble::H1, 4, 3)[3];
  const PipelinePass F = PipelinePass::Forward, B = PipelinePass::InputGradient, W = PipelinePass::WeightGradient;
  EXPECT_EQ(last.steps, (std::vector<PipelineStep>{{F, 0, 0}, {B, 0, 0}, {W, 0, 0}, {F, 1, 0}, {B, 1, 0},
                                                   {W, 1, 0}, {F, 2, 0}, {B, 2, 0}, {W, 2, 0}}));
}

}  // namespace
}  // namespace kiln
