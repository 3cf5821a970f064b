// End-to-end: kiln sweep launches each point as a kiln train run of the real binary, records
// them as the sweep's points, compares them, resumes an interrupted sweep, and refuses bad
// input in one line with nothing recorded.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "tests/run_command.h"
#include "tests/sweep_fixture.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class SweepCli : public SweepFixture {
 protected:
  SweepCli() : SweepFixture("sweep_cli") {}
};

TEST_F(SweepCli, AGridRunsEveryPointKAtATimeAndComparesThem) {
  const CommandResult r = run_command(kiln + " sweep --name lr --grid train.lr=1e-3,3e-3 --grid model.d_model=32,64 "
                                      "--parallel 2 --tag small" + base());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sweep lr: 4 points, 2 at a time"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sweep lr: launch point 3/4 lr-3: train.lr=3e-3 model.d_model=64"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sweep lr: finish point 0/4 lr-0: completed, loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("best (*): point "), std::string::npos) << r.output;

  const json runs = json_of(kiln + " runs list --sweep lr --json --store " + store_);
  ASSERT_EQ(runs.size(), 4u) << runs.dump();
  std::map<int64_t, json> by_point;
  for (const json& run : runs) {
    by_point[run["sweep_point"].get<int64_t>()] = run;
    EXPECT_EQ(run["status"], "completed");
    EXPECT_EQ(run["tags"], json::parse(R"(["lr", "small"])"));
    EXPECT_EQ(run["name"], "lr-" + std::to_string(run["sweep_point"].get<int64_t>()));
  }
  ASSERT_EQ(by_point.size(), 4u);
  // Each child logged to its own file beside the checkpoints.
  EXPECT_NE(read_text(dir_ + "/checkpoints/lr/lr-2.log").find("step 6/6 | loss"), std::string::npos);

  const json show = json_of(kiln + " sweep show lr --json --store " + store_);
  EXPECT_EQ(show["sweep"]["name"], "lr");
  EXPECT_EQ(show["parameters"], json::parse(R"(["train.lr", "model.d_model"])"));
  ASSERT_EQ(show["points"].size(), 4u);
  const char* expected[4][2] = {{"0.001", "32"}, {"0.001", "64"}, {"0.003", "32"}, {"0.003", "64"}};
  for (int p = 0; p < 4; ++p) {
    const json& point = show["points"][static_cast<size_t>(p)];
    EXPECT_EQ(point["point"], p);
    EXPECT_EQ(point["params"]["train.lr"].get<double>(), std::stod(expected[p][0]));
    EXPECT_EQ(point["params"]["model.d_model"], std::stoi(expected[p][1]));
    EXPECT_EQ(point["run_name"], "lr-" + std::to_string(p));
    EXPECT_EQ(point["status"], "completed");
    EXPECT_EQ(point["last_step"], 6);
    // The final loss is the run's last logged loss.
    EXPECT_DOUBLE_EQ(point["final_loss"].get<double>(), by_point[p]["loss"].get<double>());
    EXPECT_TRUE(point["final_valid_loss"].is_number());
  }
  // The points differ in their losses: the sweep did train four settings.
  std::set<double> losses;
  for (const json& point : show["points"]) losses.insert(point["final_loss"].get<double>());
  EXPECT_EQ(losses.size(), 4u);
  EXPECT_TRUE(show["best"]["point"].is_number());

  const CommandResult list = run_command(kiln + " sweep list --store " + store_);
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("\n 1  lr    ended       4         4          4        0       0  "), std::string::npos)
      << list.output;
}

TEST_F(SweepCli, AnInterruptedSweepResumesWithoutDuplicateRuns) {
  const std::string log = dir_ + "/sweep.log";
  // Long enough points that the signal lands mid-way through one, with checkpoints to continue.
  const int pid = start_background(kiln + " sweep --name cut --grid train.lr=1e-3,2e-3,3e-3" + base() +
                                       " --set train.steps=300 --set train.checkpoint_interval=50",
                                   log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  // Point 1 has started training: the sweep has finished point 0.
  while (read_text(dir_ + "/checkpoints/cut/cut-1.log").find("step ") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 130) << read_text(log);
  const std::string first = read_text(log);
  EXPECT_NE(first.find("sweep cut: interrupted; continue it with: kiln sweep --resume cut"), std::string::npos) << first;
  EXPECT_EQ(first.find("launch point 2/3"), std::string::npos) << first;
  const json cut = json_of(kiln + " runs list --sweep cut --json --store " + store_);
  ASSERT_EQ(cut.size(), 2u) << cut.dump();

  const CommandResult resumed = run_command(kiln + " sweep --resume cut --store " + store_);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("sweep cut: point 0 cut-0 is completed"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("cut-1: train.lr=0.002 (continued from its checkpoint)"), std::string::npos)
      << resumed.output;
  const json runs = json_of(kiln + " runs list --sweep cut --json --store " + store_);
  ASSERT_EQ(runs.size(), 3u) << runs.dump();
  for (const json& run : runs) EXPECT_EQ(run["status"], "completed") << run.dump();
  // Point 1 continued its own run from its checkpoint instead of starting another.
  EXPECT_NE(read_text(dir_ + "/checkpoints/cut/cut-1.log").find("resum"), std::string::npos);
  // A finished sweep resumed again has nothing to run.
  const CommandResult again = run_command(kiln + " sweep --resume cut --store " + store_);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("resumed: 0 of 3 points to run"), std::string::npos) << again.output;
}

TEST_F(SweepCli, RandomPointsAreDistinctAndTheSeedRepeatsThem) {
  auto params_of = [&](const std::string& name) {
    const CommandResult r = run_command(kiln + " sweep --name " + name + " --random 3 --seed 11 --parallel 2 "
                                        "--grid train.lr=log:1e-3..1e-2 --grid model.d_model=32,64" + base() +
                                        " --set train.steps=2 --set train.eval_interval=0 --set train.sample_tokens=0");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<json> params;
    const json show = json_of(kiln + " sweep show " + name + " --json --store " + store_);
    for (const json& point : show["points"]) params.push_back(point["params"]);
    return params;
  };
  const std::vector<json> first = params_of("rand-a");
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(std::set<json>(first.begin(), first.end()).size(), 3u);
  for (const json& p : first) {
    EXPECT_GE(p["train.lr"].get<double>(), 1e-3);
    EXPECT_LE(p["train.lr"].get<double>(), 1e-2);
  }
  EXPECT_EQ(params_of("rand-b"), first);
  EXPECT_EQ(json_of(kiln + " sweep show rand-a --json --store " + store_)["sweep"]["spec"]["seed"], 11);
}

TEST_F(SweepCli, BadInputIsOneLineAndRecordsNothing) {
  const std::string store_only = " --store " + store_;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" sweep" + store_only, "kiln: error: sweep: no --grid given; name a key and its values, e.g. --grid train.lr=1e-3,3e-3\n"},
      {" sweep --grid train.lrr=1,2" + store_only,
       "kiln: error: sweep: point 0 (train.lrr=1): config: unknown key train.lrr (did you mean train.lr?)\n"},
      {" sweep --grid train.lr=1e-3,fast" + store_only, ""},
      {" sweep --grid train.lr=1e-3 --parallel 0" + store_only,
       "kiln: error: sweep: --parallel must be 1 or more, got 0\n"},
      {" sweep --grid train.lr" + store_only,
       "kiln: error: sweep: --grid train.lr has no '='; write section.key=v1,v2 or section.key=lo..hi\n"},
      {" sweep --seed 3 --grid train.lr=1e-3" + store_only,
       "kiln: error: sweep: --seed draws --random points; give --random N too\n"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = run_command(kiln + args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    if (!message.empty()) {
      EXPECT_EQ(r.output, message) << args;
    }
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("kiln: error: sweep: "), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(store_)) << args;
  }
  // The bad value's line names its point and key.
  const CommandResult bad_value = run_command(kiln + " sweep --grid train.lr=1e-3,fast" + store_only);
  EXPECT_NE(bad_value.output.find("point 1 (train.lr=fast): config: "), std::string::npos) << bad_value.output;
  EXPECT_NE(bad_value.output.find("train.lr"), std::string::npos) << bad_value.output;

  // An unknown sweep to resume, in a store that exists.
  ASSERT_EQ(run_command(kiln + " train --name one" + base()).exit_code, 0);
  const CommandResult unknown = run_command(kiln + " sweep --resume nope --store " + store_);
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_EQ(std::count(unknown.output.begin(), unknown.output.end(), '\n'), 1) << unknown.output;
  EXPECT_NE(unknown.output.find("kiln: error: store: "), std::string::npos) << unknown.output;
  EXPECT_NE(unknown.output.find("nope"), std::string::npos) << unknown.output;
  EXPECT_EQ(json_of(kiln + " sweep list --json --store " + store_), json::array());
}

}  // namespace
}  // namespace kiln::test
