// End-to-end through the real binary: kiln train --ranks N starts its own ranks under mpirun,
// as root and on fewer cores than ranks, and refuses in one line what it cannot do; kiln sweep
// --ranks trains every point so.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

using nlohmann::json;

const std::string kiln = KILN_BINARY;
// Without the variables that let mpirun run as root: kiln must say so itself.
const std::string kBareEnvironment = "env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM ";

class RanksSweepCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir("ranks_sweep_cli");
    prefix_ = prepare_corpus(dir_);
    store_ = dir_ + "/runs.db";
  }
  std::string base() const {
    return small_run(prefix_) + " --set train.checkpoint_dir=" + dir_ + "/checkpoints --store " + store_;
  }
  json json_of(const std::string& command) const {
    const CommandResult r = run_command(command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.output;
    return json::parse(r.output, nullptr, false);
  }
  json run_named(const std::string& name) const {
    for (const json& run : json_of(kiln + " runs list --json --store " + store_))
      if (run["name"] == name) return run;
    return json();
  }

  std::string dir_, prefix_, store_;
};

// The first CPU this process may run on, for taskset to hold a command to one core.
int first_allowed_cpu() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  EXPECT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) return cpu;
  return 0;
}

TEST_F(RanksSweepCli, TrainRanksStartsTheRanksItselfAsRootAndOnFewerCores) {
  // One core for two ranks: kiln allows root and oversubscribes, and says so in one line.
  const CommandResult r = run_command(kBareEnvironment + "taskset -c " + std::to_string(first_allowed_cpu()) + " " +
                                      kiln + " train --ranks 2 --name pair" + base());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: 2 ranks on 1 core: oversubscribing (slower than 1 rank per core)\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("--allow-run-as-root"), std::string::npos) << "mpirun did not refuse root\n" << r.output;
  EXPECT_EQ(r.output.find("not enough slots"), std::string::npos) << r.output;
  // Rank 0 speaks for the run: its steps are printed once.
  EXPECT_NE(r.output.find("step 6/6 | loss"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 6/6 | loss"), r.output.rfind("step 6/6 | loss")) << r.output;
  const json pair = run_named("pair");
  ASSERT_TRUE(pair.is_object()) << "no run named pair";
  EXPECT_EQ(pair["status"], "completed");
  EXPECT_EQ(pair["world_size"], 2);
  EXPECT_NE(pair["layout"].get<std::string>().find("dp2"), std::string::npos) << pair.dump();

  // --ranks 1 trains in this process: no mpirun, one rank.
  const CommandResult one = run_command(kBareEnvironment + kiln + " train --ranks 1 --name single" + base());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(run_named("single")["world_size"], 1);
}

TEST_F(RanksSweepCli, WhatRanksCannotDoIsOneLineAndTrainsNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kiln + " train --ranks 0" + base(), "kiln: error: --ranks 0: expected a number of processes of 1 or more\n"},
      // Already one of the ranks an MPI launcher started.
      {"env OMPI_COMM_WORLD_SIZE=2 " + kiln + " train --ranks 2" + base(),
       "kiln: error: --ranks 2 starts mpirun itself, and this process is already one of 2 an MPI launcher started; "
       "drop --ranks, or drop the launcher (kiln train --ranks N alone)\n"},
      {"env PATH=" + dir_ + " " + kiln + " train --ranks 2" + base(),
       "kiln: error: --ranks 2 needs Open MPI's mpirun, which is not on the PATH; install it (Debian: apt install "
       "openmpi-bin) or train as 1 rank\n"},
  };
  for (const auto& [command, message] : cases) {
    const CommandResult r = run_command(command);
    EXPECT_EQ(r.exit_code, 1) << command << "\n" << r.output;
    EXPECT_EQ(r.output, message) << command;
  }
  // Under a real launch too.
  const CommandResult inside = run_command(mpirun_command(1) + kiln + " train --ranks 2" + base());
  EXPECT_NE(inside.exit_code, 0) << inside.output;
  EXPECT_NE(inside.output.find("kiln: error: --ranks 2 starts mpirun itself, and this process is already one of 1 "),
            std::string::npos)
      << inside.output;
  EXPECT_EQ(json_of(kiln + " runs list --json --store " + store_), json::array()) << "nothing trained";
}

TEST_F(RanksSweepCli, SweepRanksTrainsEveryPointAsThatManyRanks) {
  const CommandResult r =
      run_command(kBareEnvironment + kiln + " sweep --name duo --ranks 2 --grid train.lr=1e-3,3e-3" + base());
  ASSERT_EQ(r.exit_code, 0) << r.output << read_text(dir_ + "/checkpoints/duo/duo-0.log");
  EXPECT_NE(r.output.find("sweep duo: 2 points, 1 at a time of 2 ranks each"), std::string::npos) << r.output;
  const json runs = json_of(kiln + " runs list --sweep duo --json --store " + store_);
  ASSERT_EQ(runs.size(), 2u) << runs.dump();
  for (const json& run : runs) {
    EXPECT_EQ(run["status"], "completed") << run.dump();
    EXPECT_EQ(run["world_size"], 2) << run.dump();
    EXPECT_NE(run["layout"].get<std::string>().find("dp2"), std::string::npos) << run.dump();
  }
}

}  // namespace
}  // namespace kiln::test
