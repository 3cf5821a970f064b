// End-to-end through the real binary: kiln train --ranks N starts its own ranks under mpirun,
// as root and on fewer cores than ranks, and refuses in one line what it cannot do; kiln sweep
// --ranks trains every point so; a sweep stopped by SIGTERM is recorded as interrupted, and its
// best point is a completed one (or, while none has completed, the best so far, marked partial).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/run_command.h"
#include "tests/sweep_fixture.h"

namespace kiln::test {
namespace {

using nlohmann::json;

// Without the variables that let mpirun run as root: kiln must say so itself.
const std::string kBareEnvironment = "env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM ";

class RanksSweepCli : public SweepFixture {
 protected:
  RanksSweepCli() : SweepFixture("ranks_sweep_cli") {}

  json run_named(const std::string& name) const {
    for (const json& run : json_of(kiln + " runs list --json --store " + store_))
      if (run["name"] == name) return run;
    return json();
  }
  // Waits (at most 2 minutes) until the sweep's details satisfy `ready`.
  bool wait_for_sweep(const std::string& sweep, const std::function<bool(const json&)>& ready) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (std::chrono::steady_clock::now() < deadline) {
      const CommandResult r = run_command(kiln + " sweep show " + sweep + " --json --store " + store_);
      const json details = json::parse(r.output, nullptr, false);
      if (r.exit_code == 0 && details.is_object() && ready(details)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
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
  EXPECT_FALSE(std::filesystem::exists(store_)) << "nothing trained";
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
  EXPECT_EQ(json_of(kiln + " sweep show duo --json --store " + store_)["sweep"]["status"], "ended");
}

// Point 0 trains 4 steps and completes; point 1 is stopped part-way by the sweep's SIGTERM once
// its loss is below point 0's. The sweep is interrupted, and its best is point 0, the one point
// that completed, not the lower loss of fewer steps.
TEST_F(RanksSweepCli, ASweepStoppedBySigtermIsInterruptedAndItsBestIsACompletedPoint) {
  const std::string log = dir_ + "/cut.log";
  const int pid = start_background(kiln + " sweep --name cut --grid train.steps=4,100000" + base() +
                                       " --set train.lr=3e-3 --set train.eval_interval=2",
                                   log);
  const auto loss = [](const json& point) { return point["final_valid_loss"]; };
  const bool ready = wait_for_sweep("cut", [&](const json& d) {
    const json& points = d["points"];
    return points[1]["status"] == "running" && loss(points[0]).is_number() && loss(points[1]).is_number() &&
           loss(points[1]).get<double>() < loss(points[0]).get<double>();
  });
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 130) << read_text(log);
  ASSERT_TRUE(ready) << read_text(log) << read_text(dir_ + "/checkpoints/cut/cut-1.log");
  const std::string output = read_text(log);
  EXPECT_NE(output.find("sweep cut (id 1): interrupted, 2 points, 1 completed"), std::string::npos) << output;
  EXPECT_NE(output.find("\nbest (*): point 0, final valid loss "), std::string::npos) << output;

  const json show = json_of(kiln + " sweep show cut --json --store " + store_);
  EXPECT_EQ(show["sweep"]["status"], "interrupted");
  EXPECT_EQ(show["points"][0]["status"], "completed");
  EXPECT_EQ(show["points"][1]["status"], "stopped");
  ASSERT_LT(loss(show["points"][1]).get<double>(), loss(show["points"][0]).get<double>());
  EXPECT_EQ(show["best"]["point"], 0) << show["best"].dump();
  EXPECT_EQ(show["best"]["partial"], false);
  EXPECT_EQ(show["best"]["label"], "best");
  const CommandResult list = run_command(kiln + " sweep list --store " + store_);
  EXPECT_NE(list.output.find(" cut   interrupted "), std::string::npos) << list.output;
  EXPECT_EQ(json_of(kiln + " sweep list --json --store " + store_)[0]["status"], "interrupted");

  // A sweep stopped before any point completed: its best so far is marked partial.
  const int alone = start_background(kiln + " sweep --name alone --grid train.steps=100000" + base() +
                                         " --set train.eval_interval=2",
                                     dir_ + "/alone.log");
  const bool validated = wait_for_sweep("alone", [&](const json& d) { return loss(d["points"][0]).is_number(); });
  ::kill(alone, SIGTERM);
  EXPECT_EQ(wait_exit(alone), 130) << read_text(dir_ + "/alone.log");
  ASSERT_TRUE(validated) << read_text(dir_ + "/alone.log");
  const json partial = json_of(kiln + " sweep show alone --json --store " + store_);
  EXPECT_EQ(partial["sweep"]["status"], "interrupted");
  EXPECT_EQ(partial["best"]["point"], 0);
  EXPECT_EQ(partial["best"]["partial"], true);
  EXPECT_EQ(partial["best"]["steps"], 100000);
  const int64_t stopped_at = partial["points"][0]["last_step"].get<int64_t>();
  EXPECT_LT(stopped_at, 100000);
  const std::string label = "best so far (partial: " + std::to_string(stopped_at) + "/100000 steps)";
  EXPECT_EQ(partial["best"]["label"], label);
  EXPECT_NE(read_text(dir_ + "/alone.log").find("\n" + label + " (*): point 0, final valid loss "), std::string::npos)
      << read_text(dir_ + "/alone.log");
}

}  // namespace
}  // namespace kiln::test
