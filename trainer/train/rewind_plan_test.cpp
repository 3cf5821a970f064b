#include "trainer/train/rewind_plan.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using Outcome = RewindChoice::Outcome;

TEST(RewindPlan, TheNewestCheckpointBeforeTheSpike) {
  const RewindChoice choice = choose_rewind(0, 3, 250, {100, 200, 250, 300});
  EXPECT_EQ(choice.outcome, Outcome::Rewind);
  EXPECT_EQ(choice.to_step, 200);  // 250 holds the spike's own step, trained
  EXPECT_EQ(choice.number, 1);
  // The steps come in any order; a step-0 checkpoint (an import) is one to go back to.
  EXPECT_EQ(choose_rewind(2, 3, 40, {30, 0, 10}).to_step, 30);
  EXPECT_EQ(choose_rewind(2, 3, 40, {30, 0, 10}).number, 3);
  EXPECT_EQ(choose_rewind(0, 1, 5, {0}).to_step, 0);
}

TEST(RewindPlan, NoCheckpointBeforeTheSpikeTrainsOn) {
  EXPECT_EQ(choose_rewind(0, 3, 250, {}).outcome, Outcome::NoCheckpoint);
  EXPECT_EQ(choose_rewind(0, 3, 250, {250, 300}).outcome, Outcome::NoCheckpoint);
  EXPECT_EQ(no_rewind_message(choose_rewind(0, 3, 250, {}), 250, 3),
            "no rewind: the run has no checkpoint before the loss spike at step 250 (train.checkpoint_interval "
            "writes them); it trains on");
}

TEST(RewindPlan, TheLimitStopsRewindingButNotTheRun) {
  const RewindChoice spent = choose_rewind(3, 3, 250, {100, 200});
  EXPECT_EQ(spent.outcome, Outcome::LimitReached);
  EXPECT_EQ(no_rewind_message(spent, 250, 3),
            "no rewind: rewind limit reached (3 of alerts.max_rewinds=3 done); the run trains on past the loss "
            "spike at step 250");
  EXPECT_EQ(choose_rewind(2, 3, 250, {100, 200}).outcome, Outcome::Rewind);
}

TEST(RewindPlan, TheSkippedBatchesFollowTheCheckpointsDataPosition) {
  // The checkpoint of step 200 read 200 batches of 8: the run goes on past batches 201..400.
  const SkippedData skipped = skip_after(1600, 8, 200);
  EXPECT_EQ(skipped.first_batch, 201);
  EXPECT_EQ(skipped.batches, 200);
  EXPECT_EQ(skipped.data_position, 1600 + 200 * 8);
  EXPECT_EQ(skipped_text(skipped), "skipping batches 201-400 of the data");
  EXPECT_EQ(skipped_text(skip_after(1600, 8, 1)), "skipping batch 201 of the data");
  const SkippedData none = skip_after(1600, 8, 0);
  EXPECT_EQ(none.data_position, 1600);
  EXPECT_EQ(skipped_text(none), "skipping no data");
  EXPECT_EQ(rewind_message(260, 200, 250, skipped, 1, 3),
            "from step 260 back to step 200 past the loss spike at step 250, skipping batches 201-400 of the data; "
            "rewind 1 of 3");
}

}  // namespace
}  // namespace kiln
