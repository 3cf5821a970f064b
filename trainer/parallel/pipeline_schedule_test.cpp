#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/parallel/pipeline_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/error_of.h"
#include "trainer/parallel/dualpipev_schedule.h"
#include "trainer/parallel/zero_bubble_schedule.h"

namespace kiln {
namespace {

using test::error_of;

constexpr PipelinePass F = PipelinePass::Forward, B = PipelinePass::Backward;

TEST(PipelineSchedule, OneForwardOneBackwardHasMegatronsWarmUp) {
  // pp 4, 8 micro-batches: stage s runs 3 - s forwards first and holds at most 4 - s.
  for (int stage = 0; stage < 4; ++stage) {
    const PipelineSchedule s = pipeline_schedule(4, 1, stage, 8);
    EXPECT_EQ(s.warmup, 3 - stage);
    ASSERT_EQ(s.steps.size(), 16u);
    int in_flight = 0, most = 0, next_forward = 0, next_backward = 0;
    for (const PipelineStep& step : s.steps) {
      // Forwards and backwards each take the micro-batches in order.
      EXPECT_EQ(step.micro_batch, step.forward() ? next_forward++ : next_backward++);
      in_flight += step.forward() ? 1 : -1;
      most = std::max(most, in_flight);
    }
    EXPECT_EQ(most, 4 - stage);
  }
  // The last stage alternates from the start.
  const PipelineSchedule last = pipeline_schedule(4, 1, 3, 2);
  EXPECT_EQ(last.steps, (std::vector<PipelineStep>{{F, 0, 0}, {B, 0, 0}, {F, 1, 0},
                                                   {B, 1, 0}}));
  // Fewer micro-batches than the warm-up: all forwards, then all backwards.
  EXPECT_EQ(pipeline_schedule(4, 1, 0, 2).warmup, 2);
}

TEST(PipelineSchedule, InterleavedGoesRoundTheChunksInGroupsOfPp) {
  // pp 2, vpp 2, 4 micro-batches, stage 1: warm-up (2 - 1 - 1) * 2 + (2 - 1) * 2 = 2.
  const PipelineSchedule s = pipeline_schedule(2, 2, 1, 4);
  EXPECT_EQ(s.warmup, 2);
  const std::vector<PipelineStep> want{
      {F, 0, 0},  {F, 1, 0},                                  // warm-up
      {F, 0, 1},  {B, 0, 1}, {F, 1, 1},  {B, 1, 1},  // steady
      {F, 2, 0},  {B, 0, 0}, {F, 3, 0},  {B, 1, 0},
      {F, 2, 1},  {B, 2, 1}, {F, 3, 1},  {B, 3, 1},
      {B, 2, 0}, {B, 3, 0}};                                // cool-down
  EXPECT_EQ(s.steps, want);
  EXPECT_EQ(pipeline_schedule(2, 2, 0, 4).warmup, 4);
  // As many micro-batches as stages: every forward first.
  EXPECT_EQ(pipeline_schedule(4, 2, 3, 4).warmup, 8);
}

// Every stage's schedule runs against the others' to the end, each link in one order at both
// ends (pipeline_timeline.h's check).
void expect_runs_to_the_end(int pp, int vpp, int micro_batches) {
  std::vector<PipelineSchedule> ranks;
  for (int s = 0; s < pp; ++s) ranks.push_back(pipeline_schedule(pp, vpp, s, micro_batches));
  EXPECT_EQ(error_of([&] { check_pipeline_schedules(ranks, {pp, vpp, false}, micro_batches); }), "(no error)")
      << "pp " << pp << ", vpp " << vpp << ", " << micro_batches << " micro-batches";
}

TEST(PipelineSchedule, EveryStageRunsToTheEnd) {
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m = 1; m <= 16; ++m) expect_runs_to_the_end(pp, 1, m);
    for (int vpp : {2, 3})
      for (int groups : {1, 2, 3}) expect_runs_to_the_end(pp, vpp, pp * groups);
  }
}

TEST(PipelineSchedule, BadSizesAreRefused) {
  EXPECT_EQ(error_of([] { pipeline_schedule(2, 2, 0, 3); }),
            "pipeline: the interleaved schedule (parallel.vpp=2) needs the micro-batches of a "
            "step (3) to be a multiple of parallel.pp=2");
  EXPECT_EQ(error_of([] { pipeline_schedule(2, 1, 2, 4); }),
            "pipeline: stage 2 is outside [0, pp=2)");
  EXPECT_EQ(error_of([] { pipeline_schedule(2, 1, 0, 0); }),
            "pipeline: pp=2, vpp=1 and 0 micro-batches must all be >= 1");
}

TEST(PipelineSlots, CoverTheMicroBatchesInFlight) {
  // 1F1B: stage s of 4 holds 4 - s micro-batches (fewer when the step has fewer).
  for (int stage = 0; stage < 4; ++stage)
    EXPECT_EQ(pipeline_slots(pipeline_schedule(4, 1, stage, 8)), 4 - stage);
  EXPECT_EQ(pipeline_slots(pipeline_schedule(4, 1, 0, 2)), 2);
  // Interleaved pp 2 x vpp 2 over 4 micro-batches: stage 0 runs forwards of micro-batches
  // 0, 1 (chunk 0), 0, 1 (chunk 1), 2 before its first backward, which frees micro-batch 0
  // only after both of its chunks' backwards.
  EXPECT_EQ(pipeline_slots(pipeline_schedule(2, 2, 0, 4)), 4);
  EXPECT_EQ(pipeline_slots(pipeline_schedule(2, 2, 1, 4)), 3);
  EXPECT_EQ(pipeline_slots(pipeline_forwards(2, 5)), 1);
  // No two micro-batches in flight share a slot, for every schedule.
  for (int pp : {2, 3, 4})
    for (int vpp : {1, 2, 3})
      for (int stage = 0; stage < pp; ++stage) {
        const PipelineSchedule s = pipeline_schedule(pp, vpp, stage, 2 * pp);
        const int slots = pipeline_slots(s);
        std::vector<int> holder(static_cast<size_t>(slots), -1), backwards(2 * pp, 0);
        for (const PipelineStep& step : s.steps) {
          int& held = holder[static_cast<size_t>(step.micro_batch % slots)];
          if (step.forward() && step.chunk == 0) {
            EXPECT_EQ(held, -1) << pp << "x" << vpp << " stage " << stage;
            held = step.micro_batch;
          }
          EXPECT_EQ(held, step.micro_batch);
          if (!step.forward() && ++backwards[static_cast<size_t>(step.micro_batch)] == vpp)
            held = -1;
        }
      }
}

// The data-parallel buckets overlap a chunk's reductions with the rest of the step only from a
// step that finishes its gradients after every later chunk's: every schedule kiln makes has
// one for each chunk.
TEST(PipelineSchedule, EveryScheduleFinishesEachChunksGradientsInTheBuffersOrder) {
  const auto every_chunk_finishes = [](const std::vector<PipelineSchedule>& ranks, int chunks, const std::string& what) {
    for (size_t r = 0; r < ranks.size(); ++r) {
      const std::vector<bool> finishing = gradient_finishing_steps(ranks[r], chunks);
      EXPECT_EQ(std::count(finishing.begin(), finishing.end(), true), chunks) << what << ", rank " << r;
    }
  };
  for (int pp = 2; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m) {
      const std::string what = "pp " + std::to_string(pp) + ", " + std::to_string(m) + " micro-batches";
      for (int vpp : {1, 2}) {
        if (vpp > 1 && m % pp != 0) continue;
        std::vector<PipelineSchedule> ranks;
        for (int r = 0; r < pp; ++r) ranks.push_back(pipeline_schedule(pp, vpp, r, m));
        every_chunk_finishes(ranks, vpp, what + ", vpp " + std::to_string(vpp));
      }
      every_chunk_finishes(zero_bubble_schedules(ZeroBubble::H1, pp, m), 1, what + ", zb-h1");
      every_chunk_finishes(zero_bubble_schedules(ZeroBubble::V, pp, m), 2, what + ", zbv");
      if (m >= 2 * pp) every_chunk_finishes(dualpipev_schedules(pp, m), 2, what + ", dualpipev");
    }
}

// Each chunk keeps its micro-batches' activations in slots of its own, micro-batch i in slot
// i mod the chunk's count: no two of them in flight at once share one.
TEST(PipelineSchedule, EachChunksSlotsHoldItsMicroBatchesInFlight) {
  const auto check = [](const std::vector<PipelineSchedule>& ranks, int chunks, const std::string& what) {
    for (size_t r = 0; r < ranks.size(); ++r)
      for (int c = 0; c < chunks; ++c) {
        const int slots = pipeline_slots(ranks[r], c);
        EXPECT_LE(slots, pipeline_slots(ranks[r])) << what;
        std::vector<int> holder(static_cast<size_t>(slots), -1), last_step(64, -1);
        const std::vector<PipelineStep>& steps = ranks[r].steps;
        for (size_t i = 0; i < steps.size(); ++i)
          if (steps[i].chunk == c) last_step[static_cast<size_t>(steps[i].micro_batch)] = static_cast<int>(i);
        for (size_t i = 0; i < steps.size(); ++i) {
          if (steps[i].chunk != c) continue;
          int& held = holder[static_cast<size_t>(steps[i].micro_batch % slots)];
          if (steps[i].forward()) {
            EXPECT_EQ(held, -1) << what << ", rank " << r << ", chunk " << c << ", step " << i;
            held = steps[i].micro_batch;
          }
          EXPECT_EQ(held, steps[i].micro_batch) << what << ", rank " << r << ", chunk " << c;
          if (last_step[static_cast<size_t>(steps[i].micro_batch)] == static_cast<int>(i)) held = -1;
        }
      }
  };
  for (int pp = 2; pp <= 8; ++pp)
    for (int m = 2 * pp; m <= 16; ++m) {
      const std::string what = "pp " + std::to_string(pp) + ", " + std::to_string(m) + " micro-batches";
      if (m % pp == 0) {
        std::vector<PipelineSchedule> ranks;
        for (int r = 0; r < pp; ++r) ranks.push_back(pipeline_schedule(pp, 2, r, m));
        check(ranks, 2, what + ", vpp 2");
      }
      check(zero_bubble_schedules(ZeroBubble::V, pp, m), 2, what + ", zbv");
      check(dualpipev_schedules(pp, m), 2, what + ", dualpipev");
    }
  // ZBV's first rank at pp 4 over 8 micro-batches has all 8 in flight (its F7 before its W0),
  // but its last chunk turns each round within a few (f, i, w in a row).
  const PipelineSchedule first = zero_bubble_schedules(ZeroBubble::V, 4, 8)[0];
  EXPECT_EQ(pipeline_slots(first), 8);
  EXPECT_EQ(pipeline_slots(first, 0), 8);
  EXPECT_LT(pipeline_slots(first, 1), 4);
}

TEST(PipelineSchedule, AChunkThatFinishesBeforeALaterOneLeavesItsGradientsToTheStepsEnd) {
  // Chunk 0's last backward runs before chunk 1's: chunk 1's finishing step reports, chunk 0's
  // (whose buffer region follows chunk 1's) does not.
  const PipelineSchedule s{0, {{F, 0, 0}, {F, 0, 1}, {B, 0, 0}, {B, 0, 1}}};
  EXPECT_EQ(gradient_finishing_steps(s, 2), (std::vector<bool>{false, false, false, true}));
  const PipelineSchedule in_order{0, {{F, 0, 0}, {F, 0, 1}, {B, 0, 1}, {B, 0, 0}}};
  EXPECT_EQ(gradient_finishing_steps(in_order, 2), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(most_chunks_held(in_order), 2);
}

}  // namespace
}  // namespace kiln
