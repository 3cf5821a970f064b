// End-to-end: a 4-rank data-parallel run on the CPU that loses a rank (killed, hung, or
// failing on its own) ends on every rank within parallel.timeout_s instead of hanging,
// says which rank or which wait, and its run reads as failed in the store.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

using Clock = std::chrono::steady_clock;

class RankFailure : public testing::Test {
 protected:
  void SetUp() override {
#ifndef KILN_HAVE_MPI
    GTEST_SKIP() << "skipped: built without MPI";
#endif
    dir_ = fresh_dir("rank_failure");
    prefix_ = prepare_corpus(dir_);
    store_ = dir_ + "/runs.db";
  }

  // Starts `name` on 4 ranks, training until stopped; each rank writes its pid to
  // dir/pid.RANK before it becomes kiln, so the test can pick one.
  int start(const std::string& name, const std::string& settings) {
    const std::string ranks_writing_pids =
        "sh -c 'echo $$ > " + dir_ + "/pid.$OMPI_COMM_WORLD_RANK; exec \"$0\" \"$@\"' ";
    log_ = dir_ + "/" + name + ".log";
    return start_background(mpirun_command(4) + ranks_writing_pids + kiln + " train --store " +
                                store_ + " --name " + name + small_run(prefix_) +
                                " --set train.steps=1000000 --set train.log_interval=1"
                                " --set train.eval_interval=0 --set train.micro_batch=1" + settings,
                            log_);
  }

  int pid_of_rank(int rank) const {
    return std::stoi(read_text(dir_ + "/pid." + std::to_string(rank)));
  }

  store::RunRecord run(const std::string& name) const {
    auto db = store::open_store(store_, store::Access::ReadOnly);
    return store::get_run(*db, store::resolve_run(*db, name));
  }

  static double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  std::string dir_, prefix_, store_, log_;
};

TEST_F(RankFailure, AKilledRankEndsEveryRankAndTheRunReadsFailed) {
  const int mpirun = start("killed", " --set parallel.timeout_s=10");
  ASSERT_TRUE(wait_for_step_after(store_, "killed", 2)) << read_text(log_);
  const Clock::time_point killed = Clock::now();
  ASSERT_EQ(kill(pid_of_rank(2), SIGKILL), 0);
  EXPECT_NE(wait_exit(mpirun), 0);
  EXPECT_LT(seconds_since(killed), 10) << read_text(log_);
  const std::string log = read_text(log_);
  // mpirun names the rank that died, and stops the others; rank 0 names the wait it gave
  // up and records the failure before mpirun kills it.
  EXPECT_NE(log.find("process rank 2"), std::string::npos) << log;
  EXPECT_NE(log.find("kiln: error: rank 0: stopped by a signal after waiting "), std::string::npos)
      << log;
  const store::RunRecord r = run("killed");
  EXPECT_EQ(r.status, store::RunStatus::Failed) << log;
  EXPECT_NE(r.error.find(" over ranks 0-3: "), std::string::npos) << r.error;
}

TEST_F(RankFailure, AHungRankTimesTheOthersOut) {
  // A stopped process is alive to mpirun: only the timeout ends the run.
  const int mpirun = start("hung", " --set parallel.timeout_s=3");
  ASSERT_TRUE(wait_for_step_after(store_, "hung", 2)) << read_text(log_);
  const int hung = pid_of_rank(2);
  const Clock::time_point stopped = Clock::now();
  ASSERT_EQ(kill(hung, SIGSTOP), 0);
  EXPECT_NE(wait_exit(mpirun), 0);
  kill(hung, SIGKILL);
  const double took = seconds_since(stopped);
  EXPECT_GT(took, 3);
  EXPECT_LT(took, 15);
  const std::string log = read_text(log_);
  // Rank 0 at least names the wait (a rank that hears rank 0 has given up first ends quietly).
  EXPECT_NE(log.find("kiln: error: rank 0: no answer in 3 s at "), std::string::npos) << log;
  const store::RunRecord r = run("hung");
  EXPECT_EQ(r.status, store::RunStatus::Failed);
  EXPECT_NE(r.error.find("no answer in 3 s at "), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(" over ranks 0-3 (parallel.timeout_s)"), std::string::npos) << r.error;
  // The roll call names the rank that hangs, and its host.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_NE(r.error.find(std::string(": rank 2 on ") + host + " did not answer a roll call"), std::string::npos)
      << r.error;
  EXPECT_NE(log.find(r.error), std::string::npos) << log;
}

TEST_F(RankFailure, ARankFailingAloneEndsTheRunAtOnce) {
  // Only rank 0 writes checkpoints: a checkpoint folder that is a file fails it alone at
  // step 2, while the others wait for it at step 3. They hear of it at once, long before
  // the timeout.
  const std::string not_a_folder = dir_ + "/not-a-folder";
  run_command("touch " + not_a_folder);
  const Clock::time_point start_time = Clock::now();
  const int mpirun = start("alone", " --set parallel.timeout_s=100 --set train.checkpoint_interval=2"
                                    " --set train.checkpoint_dir=" + not_a_folder + "/checkpoints");
  EXPECT_NE(wait_exit(mpirun), 0);
  EXPECT_LT(seconds_since(start_time), 50);
  const std::string log = read_text(log_);
  EXPECT_NE(log.find("kiln: error: rank 0: "), std::string::npos) << log;
  for (const int rank : {1, 2, 3})
    EXPECT_EQ(log.find("kiln: error: rank " + std::to_string(rank)), std::string::npos) << log;
  const store::RunRecord r = run("alone");
  EXPECT_EQ(r.status, store::RunStatus::Failed);
  EXPECT_NE(r.error.find("checkpoints"), std::string::npos) << r.error;
  EXPECT_NE(log.find(r.error), std::string::npos) << log;
}

}  // namespace
}  // namespace kiln::test
