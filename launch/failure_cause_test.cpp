#include "launch/failure_cause.h"

#include <gtest/gtest.h>

namespace kiln::launch {
namespace {

const std::vector<std::string> kHosts = {"f-0", "f-1", "f-10"};

TEST(FailureCause, TheRollCallNamesTheHosts) {
  const FailureCause c = failure_cause(
      {"step 40/100 | loss 4.1", "kiln: error: rank 0: no answer in 3 s at all-reduce: ranks 2-3 on f-1 did not "
                                 "answer a roll call (dead, frozen or cut off)",
       "mpirun noticed that process rank 0 with PID 0 on node f-0 exited on signal 6 (Aborted)."},
      kHosts, 1);
  EXPECT_EQ(c.cause, "rank 0: no answer in 3 s at all-reduce: ranks 2-3 on f-1 did not answer a roll call (dead, "
                     "frozen or cut off)");
  EXPECT_EQ(c.hosts, std::vector<std::string>{"f-1"});
  // Rank 0 names its own host over several: the missing ranks' hosts are the failed ones.
  const FailureCause over_hosts = failure_cause(
      {"kiln: error: rank 0 on f-0: no answer in 3 s at all-reduce: rank 3 on f-10 did not answer a roll call (dead, "
       "frozen or cut off)"},
      kHosts, 1);
  EXPECT_EQ(over_hosts.hosts, std::vector<std::string>{"f-10"});
}

TEST(FailureCause, MpirunNamesADeadRanksHost) {
  const FailureCause c = failure_cause(
      {"--------", "mpirun noticed that process rank 2 with PID 0 on node f-10 exited on signal 9 (Killed)."}, kHosts,
      137);
  EXPECT_EQ(c.cause, "rank 2 on node f-10 exited on signal 9 (Killed)");
  EXPECT_EQ(c.hosts, std::vector<std::string>{"f-10"});  // not f-1, a prefix of it
}

TEST(FailureCause, MpirunNamesADaemonItLost) {
  const FailureCause c = failure_cause({"ORTE has lost communication with a remote daemon.", "",
                                        "  HNP daemon   : [[1234,0],0] on node f-0",
                                        "  Remote daemon: [[1234,0],1] on node f-1"},
                                       kHosts, 1);
  EXPECT_EQ(c.cause, "mpirun lost its daemon on f-1");
  EXPECT_EQ(c.hosts, std::vector<std::string>{"f-1"});
}

TEST(FailureCause, ElseTheFirstErrorOrTheStatus) {
  const FailureCause error =
      failure_cause({"kiln: error: rank 1: loss is nan at step 7", "kiln: error: rank 0: peer failed"}, kHosts, 1);
  EXPECT_EQ(error.cause, "rank 1: loss is nan at step 7");
  EXPECT_TRUE(error.hosts.empty());
  EXPECT_EQ(failure_cause({}, {""}, 134).cause, "the launch ended on signal 6");
  EXPECT_EQ(failure_cause({"x"}, {""}, 2).cause, "the launch exited with status 2");
}

}  // namespace
}  // namespace kiln::launch
