// End-to-end over several hosts on one machine (tests/netns_hosts.h): kiln train launched by
// mpirun across network namespaces of their own host names trains the one-process curve, says
// which of its groups cross hosts, and records each rank's host in the store; a rank frozen
// on one host or a host cut off fails the run with a line naming the ranks and their host, and
// a host whose ranks are killed is named by the launcher.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <string>
#include <vector>

#include "store/rank_places.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/netns_hosts.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

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

  int start(const std::string& name) {
    const std::string writing_pids = "sh -c 'echo $$ > " + dir_ + "/pid.$OMPI_COMM_WORLD_RANK; exec \"$0\" \"$@\"' ";
    log_ = dir_ + "/" + name + ".log";
    return start_background(hosts_.mpirun() + "-np 4 --map-by ppr:2:node " + writing_pids + kiln + " train --store " +
                                store_ + " --name " + name + small_run(prefix_) +
                                " --set train.steps=1000000 --set train.log_interval=1 --set train.eval_interval=0"
                                " --set train.micro_batch=1 --set parallel.timeout_s=3",
                            log_);
  }

  // The run's error once the store reads it failed (within `seconds`), else "".
  std::string failure(const std::string& name, double seconds) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      auto db = store::open_store(store_, store::Access::ReadOnly);
      const store::RunRecord r = store::get_run(*db, store::resolve_run(*db, name));
      if (r.status == store::RunStatus::Failed) return r.error;
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

}  // namespace
}  // namespace kiln::test
