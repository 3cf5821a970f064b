// End-to-end over several hosts on one machine (tests/netns_hosts.h): kiln train launched by
// mpirun across network namespaces of their own host names trains the one-process curve, says
// which of its groups cross hosts, and records each rank's host in the store; a rank frozen
// on one host or a host cut off fails the run with a line naming the ranks and their host, and
// a host whose ranks are killed is named by the launcher; a rank that fails with an error in a
// checkpoint ends every rank at once and loses nothing written before it.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/rank_places.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/netns_hosts.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"
#include "trainer/checkpoint/checkpoint.h"

namespace kiln::test {
namespace {

// A global batch of 8 over 10 steps, every step's loss printed.
std::string args(const std::string& prefix) {
  return small_run(prefix) + " --set train.global_batch=8 --set train.steps=10 --set train.log_interval=1";
}

void expect_same_curve(const std::string& single, const std::string& spread) {
  const std::vector<double> want = printed_losses(single), got = printed_losses(spread);
  ASSERT_EQ(want.size(), 14u) << single;  // 10 steps, validations at 3, 6, 9 and 10
  ASSERT_EQ(got.size(), want.size()) << spread;
  // fp32 sums in another order, as the layouts on one host (layout_equivalence_test.cpp).
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(std::abs(got[i] - want[i]), 1e-4 * want[i] + 5e-5) << "loss " << i;
}

std::vector<std::string> recorded_hosts(const std::string& store_path, const std::string& run) {
  auto db = store::open_store(store_path, store::Access::ReadOnly);
  std::vector<std::string> hosts;
  for (const store::RankPlace& p : store::list_rank_places(*db, store::resolve_run(*db, run))) hosts.push_back(p.host);
  return hosts;
}

TEST(MultiHost, TensorAndDataParallelOnTwoHostsOfTwoRanks) {
  NetnsHosts hosts('t', 2);
  if (!hosts.up()) GTEST_SKIP() << hosts.why_not();
  const std::string dir = fresh_dir("multi_host_tp");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const CommandResult single = run_command(kiln + " train --no-store" + args(prefix));
  ASSERT_EQ(single.exit_code, 0) << single.output;
  // Two ranks a host: each tensor pair on one host, the data-parallel pairs across.
  const CommandResult spread = run_command(hosts.mpirun() + "-np 4 --map-by ppr:2:node " + kiln + " train --store " +
                                           store + " --name spread" + args(prefix) + " --set parallel.tp=2");
  ASSERT_EQ(spread.exit_code, 0) << spread.output;
  EXPECT_NE(spread.output.find("kiln: 2 hosts: " + hosts.host(0) + " ranks 0-1; " + hosts.host(1) + " ranks 2-3\n"
                               "kiln: tensor groups within a host\n"
                               "kiln: data-parallel groups cross hosts: their collectives go over the network\n"),
            std::string::npos)
      << spread.output;
  expect_same_curve(single.output, spread.output);
  EXPECT_EQ(recorded_hosts(store, "spread"),
            (std::vector<std::string>{hosts.host(0), hosts.host(0), hosts.host(1), hosts.host(1)}));
}

TEST(MultiHost, PipelineAndDataParallelOnFourHostsOfOneRank) {
  NetnsHosts hosts('p', 4);
  if (!hosts.up()) GTEST_SKIP() << hosts.why_not();
  const std::string dir = fresh_dir("multi_host_pp");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const std::string model = " --set model.n_layer=2";
  const CommandResult single = run_command(kiln + " train --no-store" + args(prefix) + model);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const CommandResult spread = run_command(hosts.mpirun() + "-np 4 --map-by ppr:1:node " + kiln + " train --store " +
                                           store + " --name staged" + args(prefix) + model + " --set parallel.pp=2");
  ASSERT_EQ(spread.exit_code, 0) << spread.output;
  EXPECT_NE(spread.output.find("kiln: 4 hosts: " + hosts.host(0) + " rank 0; " + hosts.host(1) + " rank 1; " +
                               hosts.host(2) + " rank 2; " + hosts.host(3) + " rank 3\n"
                               "kiln: data-parallel and pipeline groups cross hosts: their collectives go over the "
                               "network\n"),
            std::string::npos)
      << spread.output;
  expect_same_curve(single.output, spread.output);
  EXPECT_EQ(recorded_hosts(store, "staged"),
            (std::vector<std::string>{hosts.host(0), hosts.host(1), hosts.host(2), hosts.host(3)}));
}

// A run of 2 hosts x 2 ranks that trains until something stops it, each rank writing its pid
// to dir/pid.RANK before it becomes kiln.
class MultiHostFault : public testing::Test {
 protected:
  void SetUp() override {
    if (!hosts_.up()) GTEST_SKIP() << hosts_.why_not();
    dir_ = fresh_dir("multi_host_fault");
    prefix_ = prepare_corpus(dir_);
    store_ = dir_ + "/runs.db";
  }

  // `more`: settings after the fixture's; `mapping`: mpirun's placement of the ranks; `faults`:
  // KILN_FAULTS.
  int start(const std::string& name, const std::string& more = "", const std::string& mapping = "ppr:2:node",
            const std::string& faults = "") {
    const std::string writing_pids = "sh -c 'echo $$ > " + dir_ + "/pid.$OMPI_COMM_WORLD_RANK; exec \"$0\" \"$@\"' ";
    log_ = dir_ + "/" + name + ".log";
    return start_background((faults.empty() ? "" : "env KILN_FAULTS=" + faults + " ") + hosts_.mpirun() +
                                "-np 4 --map-by " + mapping + " " + (faults.empty() ? "" : "-x KILN_FAULTS ") +
                                writing_pids + kiln + " train --store " + store_ + " --name " + name +
                                small_run(prefix_) +
                                " --set train.steps=1000000 --set train.log_interval=1 --set train.eval_interval=0"
                                " --set train.micro_batch=1 --set parallel.timeout_s=3" + more,
                            log_);
  }

  // The run's error once the store reads it failed (within `seconds`), else "". The store and
  // the run may not be there yet.
  std::string failure(const std::string& name, double seconds) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        auto db = store::open_store(store_, store::Access::ReadOnly);
        const store::RunRecord r = store::get_run(*db, store::resolve_run(*db, name));
        if (r.status == store::RunStatus::Failed) return r.error;
      } catch (const std::exception&) {
        // not yet made
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "";
  }

  int pid_of_rank(int rank) const { return std::stoi(read_text(dir_ + "/pid." + std::to_string(rank))); }

  NetnsHosts hosts_{'f', 2};
  std::string dir_, prefix_, store_, log_;
};

TEST_F(MultiHostFault, AFrozenRankIsNamedWithItsHost) {
  const int mpirun = start("frozen");
  ASSERT_TRUE(wait_for_step_after(store_, "frozen", 2)) << read_text(log_);
  const int frozen = pid_of_rank(3);
  ASSERT_EQ(kill(frozen, SIGSTOP), 0);
  // The timeout (3 s), the roll call (2 s), and the record.
  const std::string error = failure("frozen", 15);
  kill(frozen, SIGKILL);
  EXPECT_NE(wait_exit(mpirun), 0);
  EXPECT_NE(error.find("no answer in 3 s at "), std::string::npos) << error << read_text(log_);
  EXPECT_NE(error.find(": rank 3 on " + hosts_.host(1) + " did not answer a roll call (dead, frozen or cut off)"),
            std::string::npos)
      << error;
}

TEST_F(MultiHostFault, AKilledHostIsNamedByTheLauncher) {
  const int mpirun = start("killed");
  ASSERT_TRUE(wait_for_step_after(store_, "killed", 2)) << read_text(log_);
  // Both ranks of host 1 at once, as a machine that loses its power.
  ASSERT_EQ(kill(pid_of_rank(2), SIGKILL), 0);
  ASSERT_EQ(kill(pid_of_rank(3), SIGKILL), 0);
  EXPECT_NE(wait_exit(mpirun), 0);
  // mpirun names a dead rank and its host, and stops the others. (Rank 0 records the failure
  // before mpirun's kill in most runs here but not all: docs/resilience.md, not yet.)
  const std::string log = read_text(log_);
  EXPECT_TRUE(log.find("process rank 2 with PID") != std::string::npos ||
              log.find("process rank 3 with PID") != std::string::npos)
      << log;
  EXPECT_NE(log.find(" on node " + hosts_.host(1) + " exited on signal 9"), std::string::npos) << log;
}

TEST_F(MultiHostFault, ACutHostIsNamedWithItsRanks) {
  const int mpirun = start("cut");
  ASSERT_TRUE(wait_for_step_after(store_, "cut", 2)) << read_text(log_);
  ASSERT_EQ(run_command(source_dir() + "/scripts/netns-hosts cut " + hosts_.name() + " " + hosts_.host(1)).exit_code, 0);
  const std::string error = failure("cut", 15);
  EXPECT_NE(error.find(": ranks 2-3 on " + hosts_.host(1) + " did not answer a roll call"), std::string::npos)
      << error << read_text(log_);
  // What was cut off cannot hear of the end: the hosts go, and the launch with them.
  run_command(source_dir() + "/scripts/netns-hosts down " + hosts_.name());
  wait_exit(mpirun);
}

// A rank that fails with an error in a checkpoint: every rank hears of it at once, one line
// names the rank and its host, and the checkpoint before it stays whole and the newest.
class MultiHostCheckpointFault : public MultiHostFault {
 protected:
  // Checkpoints at steps 2, 4, ...; a write that fails ends the run (train.checkpoint_failures=1);
  // a timeout far past what the end takes, so that an end within it is not a timeout's.
  static constexpr double kTimeoutS = 30;
  int start_failing(const std::string& name, const std::string& mapping, const std::string& faults,
                    const std::string& more = "") {
    return start(name,
                 " --set train.checkpoint_interval=2 --set train.checkpoint_failures=1 --set parallel.timeout_s=30" +
                     more,
                 mapping, faults);
  }

  // Waits for the run to read failed and for mpirun to end, which must come within the timeout;
  // returns the run's error.
  std::string ended(const std::string& name, int mpirun) {
    const std::string error = failure(name, 120);
    if (error.empty()) {
      kill(mpirun, SIGKILL);
      ADD_FAILURE() << "the run never read failed: " << read_text(log_);
      return "";
    }
    const auto failed = std::chrono::steady_clock::now();
    EXPECT_NE(wait_exit(mpirun), 0);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - failed).count(), kTimeoutS);
    return error;
  }

  // The lines of the launch's output that kiln printed as errors.
  std::vector<std::string> error_lines() const {
    std::vector<std::string> lines;
    std::istringstream log(read_text(log_));
    for (std::string line; std::getline(log, line);)
      if (line.find("kiln: error: ") != std::string::npos) lines.push_back(line);
    return lines;
  }

  // The run's checkpoints hold step 2 alone, whole and named by `latest`, and nothing half
  // written is left beside it.
  void expect_step_two_kept(const std::string& name) const {
    const std::string root = dir_ + "/checkpoints/" + name;
    EXPECT_EQ(complete_checkpoint_steps(root), std::vector<int64_t>{2});
    for (const auto& entry : std::filesystem::directory_iterator(root))
      EXPECT_NE(entry.path().filename().string().rfind(".tmp-", 0), 0u) << entry.path();
    const std::string latest = find_checkpoint(root, dir_ + "/checkpoints");
    EXPECT_EQ(std::filesystem::path(latest).filename(), "step-00000002");
    EXPECT_EQ(Checkpoint(latest).state().step, 2);  // every file as its manifest says
  }
};

TEST_F(MultiHostCheckpointFault, TheWriterFailingMidWriteEndsEveryRankAndKeepsTheCheckpointBefore) {
  // Rank 0, the one that writes, on host 0; its write of step 4 fails after it has begun.
  const int mpirun = start_failing("writer", "ppr:2:node", "checkpoint-error@4:0");
  const std::string error = ended("writer", mpirun);
  EXPECT_EQ(error.rfind("the checkpoint of step 4 was not written (KILN_FAULTS: rank 0's write fails mid-checkpoint "
                        "at step 4): 1 checkpoint in a row could not be written",
                        0),
            0u)
      << error << read_text(log_);
  // One line, from the rank that failed: the others heard of it and ended without one.
  EXPECT_EQ(error_lines(), std::vector<std::string>{"kiln: error: rank 0 on " + hosts_.host(0) + ": " + error})
      << read_text(log_);
  expect_step_two_kept("writer");
}

TEST_F(MultiHostCheckpointFault, ARankOnAnotherHostFailingInTheGatherIsNamedWithItsHost) {
  // Ranks dealt to the hosts in turn: the first tensor group, ranks 0 and 1, spans both, and
  // the checkpoint of step 4 begins with its gather to rank 0, which rank 1 on host 1 fails.
  const int mpirun = start_failing("gather", "node", "checkpoint-error@4:1", " --set parallel.tp=2");
  const std::string error = ended("gather", mpirun);
  const std::string rank_one = "rank 1 on " + hosts_.host(1);
  EXPECT_EQ(error, rank_one + " failed: KILN_FAULTS: rank 1 fails in the checkpoint of step 4") << read_text(log_);
  // Rank 1 says it, and rank 0 what it recorded; no rank waited out the timeout.
  std::vector<std::string> lines = error_lines();
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"kiln: error: " + error,
                                             "kiln: error: " + rank_one +
                                                 ": KILN_FAULTS: rank 1 fails in the checkpoint of step 4"}))
      << read_text(log_);
  expect_step_two_kept("gather");
}

}  // namespace
}  // namespace kiln::test
