#include "store/run_end.h"

#include <gtest/gtest.h>

#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::run_info;
using testing_util::StoreTest;

class RunEndTest : public StoreTest {};

TEST_F(RunEndTest, ARunLeftLiveEndsFailedOnceAndAnEndedRunKeepsItsOwnEnd) {
  const double before = unix_now();
  int64_t killed = 0, completed = 0;
  {
    // Its process gone without a word, as rank 0 killed by mpirun is.
    RunWriter writer(path());
    killed = writer.create_run(run_info("killed"));
  }
  {
    RunWriter writer(path());
    completed = writer.create_run(run_info("completed"));
    writer.finish(RunStatus::Completed);
  }
  auto db = open_store(path(), Access::ReadWrite);
  ASSERT_EQ(get_run(*db, killed).status, RunStatus::Running);
  const std::string cause = "rank 0 on node a exited on signal 9 (Killed)";
  // An attempt that began after this one's start did not reach this run.
  EXPECT_FALSE(fail_live_run(*db, killed, unix_now() + 60, cause, 1.8e9));
  EXPECT_EQ(get_run(*db, killed).status, RunStatus::Running);
  EXPECT_TRUE(fail_live_run(*db, killed, before, cause, 1.8e9));
  const RunRecord run = get_run(*db, killed);
  EXPECT_EQ(run.status, RunStatus::Failed);
  EXPECT_EQ(run.error, cause);
  EXPECT_DOUBLE_EQ(run.ended_at.value_or(0), 1.8e9);
  const std::vector<Event> events = list_events(*db, killed);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, "end");
  EXPECT_EQ(events.back().message, "failed: " + cause);
  // Once ended, its end stays the first one recorded.
  EXPECT_FALSE(fail_live_run(*db, killed, before, "another cause", 1.9e9));
  EXPECT_EQ(get_run(*db, killed).error, cause);
  EXPECT_EQ(list_events(*db, killed).size(), events.size());
  EXPECT_FALSE(fail_live_run(*db, completed, before, cause, 1.8e9));
  EXPECT_EQ(get_run(*db, completed).status, RunStatus::Completed);
}

}  // namespace
}  // namespace kiln::store
