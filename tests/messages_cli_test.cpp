// End-to-end: what kiln says to a new user. An unknown command is named with the closest one
// (and `--help` after it is an error too); every "next:" hint and `kiln plan`'s "run the first"
// line runs as printed; Ctrl-C ends with the line a release ends with; export and import take
// hf by default, and eval the run's own validation data; the core-share notice is said only for
// a share that lasts, counting only live runs, and a run is planned on the threads it has.
#include <gtest/gtest.h>

#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The lines of `text` after the line `header`, up to the first blank line or the end.
std::vector<std::string> lines_after(const std::string& text, const std::string& header) {
  std::vector<std::string> lines;
  const size_t at = text.find("\n" + header + "\n");
  if (at == std::string::npos) return lines;
  std::istringstream in(text.substr(at + header.size() + 2));
  for (std::string line; std::getline(in, line) && !line.empty();) lines.push_back(line);
  return lines;
}

// A printed command (`kiln ...`, after any indent and before two spaces of explanation) with
// this build's binary in place of `kiln`.
std::string as_run(const std::string& hint) {
  const size_t start = hint.find("kiln ");
  const size_t end = hint.find("  ", start);
  return kiln + hint.substr(start + 4, end == std::string::npos ? std::string::npos : end - start - 4);
}

bool wait_for(const std::string& log, const std::string& text) {
  for (int i = 0; i < 600 && read_text(log).find(text) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return read_text(log).find(text) != std::string::npos;
}

TEST(MessagesCli, AnUnknownCommandIsNamedWithTheClosest) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" trian", "kiln: error: unknown command trian (did you mean train?)\n"},
      {" runs shw 1", "kiln: error: unknown command runs shw (did you mean runs show?)\n"},
      {" trian --help", "kiln: error: unknown command trian (did you mean train?)\n"},
  };
  for (const auto& [args, expected] : cases) {
    const CommandResult r = run_command(kiln + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.output, expected) << args;
  }
  // Nothing close: the commands there are, and --help does not stand in for them.
  const CommandResult nosuch = run_command(kiln + " nosuch --help");
  EXPECT_EQ(nosuch.exit_code, 1);
  EXPECT_EQ(nosuch.output.rfind("kiln: error: unknown command nosuch; kiln's commands are train, ", 0), 0u)
      << nosuch.output;
  EXPECT_EQ(std::count(nosuch.output.begin(), nosuch.output.end(), '\n'), 1) << nosuch.output;
  // A group without its command lists them.
  const CommandResult runs = run_command(kiln + " runs");
  EXPECT_EQ(runs.exit_code, 1);
  EXPECT_EQ(runs.output.rfind("kiln: error: kiln runs needs a command: list, show, ", 0), 0u) << runs.output;
  // Known commands are untouched.
  EXPECT_EQ(run_command(kiln + " runs show --help").exit_code, 0);
}

// Each "next:" line a finished run prints runs as printed (the dashboard and the terminal UI,
// which stay open, aside): sampling the checkpoint needs no --prompt of a run without one,
// and a store other than the default one is named.
TEST(MessagesCli, EveryNextHintRunsAsPrinted) {
  const std::string dir = fresh_dir("messages_next");
  const std::string trained = run_command(kiln + " train --name hinted --store " + dir + "/runs.db" +
                                          small_run(prepare_corpus(dir)) +
                                          " --set train.sample_prompt= --set train.checkpoint_interval=6"
                                          " --set train.checkpoint_dir=" + dir + "/checkpoints")
                                  .output;
  const std::vector<std::string> hints = lines_after(trained, "next:");
  ASSERT_EQ(hints.size(), 4u) << trained;
  for (const std::string& hint : hints) {
    if (hint.find("kiln serve") != std::string::npos || hint.find("kiln tui") != std::string::npos) {
      EXPECT_NE(hint.find("--store " + dir + "/runs.db"), std::string::npos) << hint;
      continue;
    }
    const CommandResult r = run_command(as_run(hint));
    EXPECT_EQ(r.exit_code, 0) << hint << "\n" << r.output;
  }
  EXPECT_NE(trained.find("  kiln generate --checkpoint " + dir + "/checkpoints/hinted/step-00000006  "),
            std::string::npos)
      << trained;
}

// kiln plan's first layout as a command: the ranks, the model's settings and the layout's, so
// that planning exactly that command's config predicts the same layout; the table fits 120
// columns, and --wide shows each arena and each part of the step.
TEST(MessagesCli, PlansRunTheFirstLineRunsThatLayoutAndTheTableFits120Columns) {
  const std::string model = " --set model.n_layer=24 --set model.d_model=2048 --set model.n_head=16";
  const CommandResult plan = run_command(kiln + " plan --gpus 8 --gpu h100 --top 3" + model);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const std::vector<std::string> first = lines_after(plan.output, "run the first:");
  ASSERT_EQ(first.size(), 1u) << plan.output;
  EXPECT_EQ(first[0].rfind("  kiln train --ranks 8" + model + " --set parallel.", 0), 0u) << first[0];
  std::istringstream lines(plan.output.substr(0, plan.output.find("run the first:")));
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 120u) << line;

  // The line's settings are the first layout: planned as they are, they give its name.
  std::string settings = first[0].substr(first[0].find(" --set"));
  const nlohmann::json ranked = nlohmann::json::parse(run_command(kiln + " plan --json --gpus 8 --gpu h100" + model).output);
  const nlohmann::json own =
      nlohmann::json::parse(run_command(kiln + " plan --json --this-layout --gpus 8 --gpu h100" + settings).output);
  EXPECT_EQ(own["layouts"][0]["layout"], ranked["layouts"][0]["layout"]) << settings;

  const CommandResult wide = run_command(kiln + " plan --wide --gpus 8 --gpu h100 --top 3" + model);
  ASSERT_EQ(wide.exit_code, 0) << wide.output;
  EXPECT_TRUE(std::regex_search(wide.output, std::regex("params +grads +optim +activ +other +step ms +compute +tp +cp "
                                                        "+ep +pp +dp +optim ms +tokens/s +MFU\n")))
      << wide.output;
}

// Ctrl-C and a release end with one line, which says how to go on.
TEST(MessagesCli, CtrlCEndsWithTheLineAReleaseEndsWith) {
  const std::string dir = fresh_dir("messages_ctrl_c");
  const std::string store = dir + "/runs.db";
  const std::string run = kiln + " train --store " + store + small_run(prepare_corpus(dir)) +
                          " --set train.steps=1000000 --set train.log_interval=1 --set train.eval_interval=0"
                          " --set train.checkpoint_interval=1000 --set train.checkpoint_dir=" + dir + "/checkpoints";
  const std::string interrupted_log = dir + "/interrupted.log", released_log = dir + "/released.log";
  const int interrupted = start_background(run + " --name stopped", interrupted_log);
  ASSERT_TRUE(wait_for(interrupted_log, " | loss ")) << read_text(interrupted_log);
  kill(interrupted, SIGINT);
  EXPECT_EQ(wait_exit(interrupted), 130);
  EXPECT_NE(read_text(interrupted_log).find("kiln: continue it with: kiln runs resume stopped --store " + store + "\n"),
            std::string::npos)
      << read_text(interrupted_log);

  const int released = start_background(run + " --name freed", released_log);
  ASSERT_TRUE(wait_for(released_log, " | loss ")) << read_text(released_log);
  const CommandResult release = run_command(kiln + " runs release freed --wait --store " + store);
  EXPECT_EQ(release.exit_code, 0) << release.output;
  EXPECT_EQ(wait_exit(released), 0);
  const std::string line = "continue it with: kiln runs resume freed --store " + store + "\n";
  EXPECT_NE(release.output.find("released; " + line), std::string::npos) << release.output;
  EXPECT_NE(read_text(released_log).find("kiln: " + line), std::string::npos) << read_text(released_log);
}

// export and import need no --format (hf is the one there is); eval on the run's own data by
// default gives the validation loss the run logged at that checkpoint.
TEST(MessagesCli, InterchangeTakesHfAndEvalTheRunsValidationByDefault) {
  const std::string dir = fresh_dir("messages_defaults");
  const std::string trained = run_command(kiln + " train --no-store --name base" + small_run(prepare_corpus(dir)) +
                                          " --set train.checkpoint_interval=6 --set train.checkpoint_dir=" + dir +
                                          "/checkpoints")
                                  .output;
  const std::smatch logged = [&] {
    std::smatch m;
    std::regex_search(trained, m, std::regex("eval step 6 \\| valid loss ([0-9.]+)"));
    return m;
  }();
  ASSERT_FALSE(logged.empty()) << trained;
  const std::string checkpoint = dir + "/checkpoints/base";

  const CommandResult eval = run_command("(" + kiln + " eval --checkpoint " + checkpoint + " 2>/dev/null)");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NEAR(nlohmann::json::parse(eval.output)["loss"].get<double>(), std::stod(logged[1]), 1e-4) << eval.output;

  const CommandResult exported = run_command(kiln + " export --checkpoint " + checkpoint + " --output " + dir + "/hf");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_TRUE(fs::exists(dir + "/hf/model.safetensors"));
  const CommandResult imported = run_command(kiln + " import --input " + dir + "/hf --output " + dir + "/again");
  EXPECT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_TRUE(fs::exists(dir + "/again/step-00000000"));
}

// Two CPU runs counted in a registry of their own here: the second starts on its share, says
// so at once and is planned on it; the first follows the count silently while the second comes
// and goes within seconds. An entry whose process is not the run that made it is no run.
class CoreShareCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directory(dir_ + "/runtime");
    fs::permissions(dir_ + "/runtime", fs::perms::owner_all);
    run_ = "env XDG_RUNTIME_DIR=" + dir_ + "/runtime " + kiln + " train --no-store" + small_run(prepare_corpus(dir_)) +
           " --set backend.threads=0 --set train.eval_interval=0 --set train.steps=1000000"
           " --set train.log_interval=100";
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    cores_ = CPU_COUNT(&set);
  }

  // "planned X ms a step" as the run printed it.
  static double planned_ms(const std::string& log) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex("kiln: planned ([0-9.]+) ms a step"))) return NAN;
    return std::stod(m[1]);
  }

  std::string dir_, run_;
  int cores_ = 1;
};

TEST_F(CoreShareCli, AShareThatComesAndGoesInSecondsIsNotSaidAndTheSecondRunIsPlannedOnItsShare) {
  const int half = std::max(1, cores_ / 2);
  if (half == cores_) GTEST_SKIP() << "one core: no share to change";
  const std::string first_log = dir_ + "/first.log", second_log = dir_ + "/second.log";
  const int first = start_background(run_, first_log);
  ASSERT_TRUE(wait_for(first_log, " | loss ")) << read_text(first_log);
  const Clock::time_point came = Clock::now();
  const int second = start_background(run_, second_log);
  ASSERT_TRUE(wait_for(second_log, " | loss ")) << read_text(second_log);
  kill(second, SIGINT);
  EXPECT_EQ(wait_exit(second), 130);
  const double lived_s = std::chrono::duration<double>(Clock::now() - came).count();
  // Let the first count again with the second gone, and take its cores back.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  kill(first, SIGINT);
  EXPECT_EQ(wait_exit(first), 130);

  const std::string sharing = "kiln: 2 CPU runs share this machine's " + std::to_string(cores_) + " cores: step ";
  const std::string second_text = read_text(second_log), first_text = read_text(first_log);
  EXPECT_NE(second_text.find(sharing + "1 on " + std::to_string(half) + " thread"), std::string::npos) << second_text;
  // A share is said once it has lasted 10 s: on a machine too busy to start and end the
  // second run within 8, the first may rightly say it.
  if (lived_s < 8) {
    EXPECT_EQ(first_text.find(" CPU run"), std::string::npos) << first_text;
  }
  EXPECT_GT(planned_ms(second_text), planned_ms(first_text)) << first_text << second_text;
  EXPECT_TRUE(fs::is_empty(dir_ + "/runtime/kiln/cpu-runs"));
}

TEST_F(CoreShareCli, AnEntryWhoseProcessIsNotItsRunIsNotCounted) {
  // A kiln process of this user that never registered (a run on fixed threads), named by an
  // entry as if its id had been a run's: ids are given again once a run has ended.
  const std::string fixed_log = dir_ + "/fixed.log";
  const int fixed = start_background(kiln + " train --no-store" + small_run(prepare_corpus(dir_)) +
                                         " --set train.steps=1000000 --set train.log_interval=100",
                                     fixed_log);
  ASSERT_TRUE(wait_for(fixed_log, " | loss ")) << read_text(fixed_log);
  const std::string registry = dir_ + "/runtime/kiln/cpu-runs";
  fs::create_directories(registry);
  fs::permissions(dir_ + "/runtime/kiln", fs::perms::owner_all);
  fs::permissions(registry, fs::perms::owner_all);
  std::ofstream(registry + "/" + std::to_string(fixed) + ".0") << "1";
  const CommandResult alone = run_command(run_ + " --set train.steps=4");
  kill(fixed, SIGINT);
  EXPECT_EQ(wait_exit(fixed), 130);
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_EQ(alone.output.find(" CPU runs share"), std::string::npos) << alone.output;
}

}  // namespace
}  // namespace kiln::test
