#include "trainer/train/checkpoint_failures.h"

#include <gtest/gtest.h>

#include "tests/error_of.h"

namespace kiln {
namespace {

using test::error_of;

TEST(CheckpointFailures, WarnsUntilTheLimitInARowThenFails) {
  CheckpointFailures failures;
  EXPECT_FALSE(failures.last_failed());
  EXPECT_EQ(failures.failed(10, "disk full", 3),
            "the checkpoint of step 10 was not written (disk full); training goes on and tries again at the "
            "next checkpoint (1 failure in a row; 3 stop the run, train.checkpoint_failures)");
  EXPECT_TRUE(failures.last_failed());
  failures.written();  // a checkpoint that works starts the count over
  EXPECT_FALSE(failures.last_failed());
  EXPECT_NE(failures.failed(30, "disk full", 3).find("(1 failure in a row; 3 stop"), std::string::npos);
  EXPECT_NE(failures.failed(40, "disk full", 3).find("(2 failures in a row; 3 stop"), std::string::npos);
  EXPECT_EQ(error_of([&] { failures.failed(50, "disk full", 3); }),
            "the checkpoint of step 50 was not written (disk full): 3 checkpoints in a row could not be "
            "written (train.checkpoint_failures=3), so the run stops; free space where train.checkpoint_dir "
            "points, or point it elsewhere, and resume from the last checkpoint written");
}

TEST(CheckpointFailures, ALimitOfOneFailsAtTheFirst) {
  CheckpointFailures failures;
  EXPECT_EQ(error_of([&] { failures.failed(5, "denied", 1); }).rfind(
                "the checkpoint of step 5 was not written (denied): 1 checkpoint in a row could not be written", 0),
            0u);
}

}  // namespace
}  // namespace kiln
