#include "trainer/parallel/pipeline_picture.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/error_of.h"
#include "trainer/parallel/zero_bubble_schedule.h"

namespace kiln {
namespace {

using test::error_of;

std::vector<PipelineSchedule> one_f_one_b(int pp, int m) {
  std::vector<PipelineSchedule> ranks;
  for (int r = 0; r < pp; ++r) ranks.push_back(pipeline_schedule(pp, 1, r, m));
  return ranks;
}

TEST(PipelinePicture, DrawsOneFOneBUnitByUnit) {
  // Rank 1 runs micro-batch 0's forward once rank 0's is done, its backward (two units), then
  // micro-batch 1; rank 0's backwards wait for rank 1's.
  EXPECT_EQ(draw_pipeline(one_f_one_b(2, 2), {2, 1, false}, 2),
            "rank 0 | F0 F1 .. .. B0 B0 .. B1 B1\n"
            "rank 1 | .. F0 B0 B0 F1 B1 B1 .. ..\n"
            "F forward, B backward (two units), I input gradient, W weight gradient; lower case: a rank's later "
            "chunk; . idle\n"
            "bubble 33.3% of the step (9 units)\n");
}

TEST(PipelinePicture, DrawsTheVsSecondChunkInLowerCase) {
  const std::string zbv = draw_pipeline(zero_bubble_schedules(ZeroBubble::V, 2, 2), {2, 2, true}, 2);
  // The first rank starts the V and ends it: its chunk 0's forward first, its chunk 1's (the
  // head's) input gradient right after its forward.
  EXPECT_EQ(zbv.rfind("rank 0 | F0 F1", 0), 0u) << zbv;
  EXPECT_NE(zbv.find("f0 i0"), std::string::npos) << zbv;
  EXPECT_NE(zbv.find("rank 1 | "), std::string::npos) << zbv;
  EXPECT_EQ(zbv.find("rank 2"), std::string::npos) << zbv;
  EXPECT_NE(zbv.find("w1"), std::string::npos) << zbv;
}

TEST(PipelinePicture, RefusesASchedulesThatCannotRun) {
  std::vector<PipelineSchedule> ranks = one_f_one_b(2, 2);
  std::swap(ranks[1].steps[0], ranks[1].steps[1]);  // a backward before its forward
  EXPECT_EQ(error_of([&] { draw_pipeline(ranks, {2, 1, false}, 2); }),
            "pipeline: the schedule cannot run: rank 1 step 0 (backward of micro-batch 0, chunk 0) is out of order "
            "or twice");
}

}  // namespace
}  // namespace kiln
