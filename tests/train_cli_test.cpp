// End-to-end: the kiln binary prepares data, trains, and refuses bad input with one
// line and a non-zero exit.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

// Not recorded: the run store's tests pass --store themselves (train_store_test.cpp).
std::string unrecorded_run(const std::string& prefix) { return " --no-store" + small_run(prefix); }

TEST(TrainCli, TrainsAndSamples) {
  const std::string prefix = prepare_corpus(fresh_dir("train_cli"));
  const CommandResult r = run_command(kiln + " train" + unrecorded_run(prefix));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 6/6 | loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval step 6 | valid loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--- sample"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kiln: memory parameters"), std::string::npos) << r.output;
}

// A finished run ends with the commands that take the user on from it, each naming what
// exists: the run in its store, its last checkpoint.
TEST(TrainCli, EndsWithItsNextSteps) {
  const std::string dir = fresh_dir("train_cli_next");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const CommandResult r = run_command(kiln + " train --name first --store " + store + small_run(prefix) +
                                      " --set train.checkpoint_interval=4 --set train.checkpoint_dir=" + dir +
                                      "/checkpoints");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t next = r.output.find("next:\n");
  ASSERT_NE(next, std::string::npos) << r.output;
  const std::string steps = r.output.substr(next);
  EXPECT_NE(steps.find("\n  kiln runs show first --store " + store + " "), std::string::npos) << steps;
  EXPECT_NE(steps.find("\n  kiln serve --store " + store + " "), std::string::npos) << steps;
  EXPECT_NE(steps.find("\n  kiln tui --store " + store + " "), std::string::npos) << steps;
  // The last checkpoint is the one after step 6, not the one after step 4.
  EXPECT_NE(steps.find("\n  kiln generate --checkpoint " + dir + "/checkpoints/first/step-00000006 --prompt Doc"),
            std::string::npos)
      << steps;
  // Each command works as printed.
  EXPECT_EQ(run_command(kiln + " runs show first --store " + store).exit_code, 0);
  EXPECT_EQ(run_command(kiln + " generate --checkpoint " + dir + "/checkpoints/first/step-00000006 --prompt Doc "
                        "--max-tokens 4").exit_code,
            0);

  // Unrecorded and without a checkpoint (its final one cannot be written: the folder would be
  // inside a file) there is nothing to point at.
  const CommandResult bare =
      run_command(kiln + " train" + unrecorded_run(prefix) + " --set train.checkpoint_dir=" + dir + "/corpus.txt/x");
  ASSERT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_EQ(bare.output.find("next:"), std::string::npos) << bare.output;
}

// OpenMP threads wait for each other passively (asleep, not spinning on a core another
// process needs), unless the user chose otherwise: kiln runs itself again with the policy set.
TEST(TrainCli, OpenMpThreadsSpinBrieflyUnlessTheUserChose) {
  const std::string dir = fresh_dir("train_cli_waits");
  const std::string prefix = prepare_corpus(dir);
  const std::string run = kiln + " train" + unrecorded_run(prefix) + " --set train.steps=1000000 --set train.log_interval=100";
  int runs = 0;
  // The value of `variable` in the environment of the training process.
  const auto setting_of = [&](const std::string& env, const std::string& variable) {
    const std::string log = dir + "/run" + std::to_string(++runs) + ".log";
    const int pid = start_background(env + run, log);
    for (int i = 0; i < 300 && read_text(log).find(" | loss ") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::string environ(1, '\n');  // so the first entry starts a line too
    environ += read_text("/proc/" + std::to_string(pid) + "/environ");
    kill(pid, SIGINT);
    EXPECT_EQ(wait_exit(pid), 130) << read_text(log);
    std::replace(environ.begin(), environ.end(), '\0', '\n');
    const std::string key = "\n" + variable + "=";
    const size_t at = environ.find(key);
    return at == std::string::npos
               ? std::string("(unset)")
               : environ.substr(at + key.size(), environ.find('\n', at + 1) - at - key.size());
  };
  EXPECT_EQ(setting_of("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT ", "GOMP_SPINCOUNT"), "10000");
  EXPECT_EQ(setting_of("env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active ", "GOMP_SPINCOUNT"), "(unset)");
  EXPECT_EQ(setting_of("env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=1000 ", "GOMP_SPINCOUNT"), "1000");
}

// A smoke run of a config that warms up over more steps than it runs trains, and says so.
TEST(TrainCli, ASmokeRunShorterThanTheWarmUpTrains) {
  const std::string prefix = prepare_corpus(fresh_dir("train_cli_smoke"));
  const CommandResult r = run_command(kiln + " train" + unrecorded_run(prefix) + " --set train.warmup=50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: warning: train.warmup=50 is longer than train.steps=6; warming up over all 6 steps\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step 6/6 | loss"), std::string::npos) << r.output;
}

TEST(TrainCli, DeepSeekRoutingIsSaidAtStart) {
  const std::string dir = fresh_dir("train_deepseek_routing");
  const CommandResult r = run_command(
      kiln + " train --no-store" + small_run(prepare_corpus(dir)) +
      " --set train.steps=2 --set model.arch=llama --set model.n_layer=2 --set moe.dense_layers=1"
      " --set moe.num_experts=8 --set moe.ffn_hidden=24 --set moe.score=sigmoid --set moe.gate_scale=2.5"
      " --set moe.route_groups=4 --set moe.route_groups_topk=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: mixture of experts in 1 of 2 layers: 8 experts of width 24, top 2 (sigmoid "
                          "scores, normalised, gates x2.5, from 2 of 4 groups), dropless; "),
            std::string::npos)
      << r.output;
}

TEST(TrainCli, BadConfigValueIsOneLineAndNonZero) {
  const CommandResult r = run_command(kiln + " train --set model.n_head=5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("model.n_head"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
}

// The argument parser's failures read like kiln's own: one line, exit status 1.
TEST(TrainCli, ParseErrorsAreOneLineAndExitOne) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" train --set train.lr 3e-4",
       "kiln: error: --set train.lr 3e-4: write --set key=value as one word, here --set train.lr=3e-4\n"},
      {" train --config /nonexistent.json",
       "kiln: error: --config: File does not exist: /nonexistent.json (see --help)\n"},
      {" runs show", "kiln: error: run is required (see --help)\n"},
      {" train --no-such-flag", "kiln: error: the following argument was not expected: --no-such-flag (see --help)\n"},
  };
  for (const auto& [args, expected] : cases) {
    const CommandResult r = run_command(kiln + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.output, expected) << args;
  }
  // No command at all: the commands there are.
  const CommandResult bare = run_command(kiln);
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_EQ(bare.output.rfind("kiln: error: kiln needs a command: train, data, ", 0), 0u) << bare.output;
  EXPECT_EQ(bare.output.find('\n'), bare.output.size() - 1) << bare.output;
  const CommandResult version = run_command(kiln + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(std::regex_match(version.output, std::regex("kiln [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit [^ )]+\\)\n")))
      << version.output;
}

TEST(TrainCli, MissingDataIsOneLineAndNonZero) {
  const CommandResult r = run_command(
      kiln + " train --set data.tokenizer=byte --set 'data.paths=[\"/nonexistent/corpus\"]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/corpus"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
}

// A fresh clone has no data/: the first run says how to get some.
TEST(TrainCli, WithoutDataItSaysHowToGetSome) {
  const std::string dir = fresh_dir("train_cli_no_data");
  const CommandResult fresh = run_command("cd " + dir + " && " + kiln + " train --no-store");
  EXPECT_EQ(fresh.exit_code, 1);
  EXPECT_EQ(fresh.output,
            "kiln: error: data: no dataset of data.paths exists (no data/kjv-bpe.idx): for the demo corpus run "
            "scripts/prepare-kjv.sh (or make demo); for your own text, prepare it with `kiln data prepare --input "
            "TEXT --tokenizer TOKENIZER --output PREFIX` (docs/data.md)\n");
  const std::string prefix = prepare_corpus(dir);
  const CommandResult one_missing =
      run_command(kiln + " train" + unrecorded_run(prefix) + " --set 'data.paths=[\"" + prefix + "\", \"" + dir + "/nope\"]'");
  EXPECT_EQ(one_missing.output, "kiln: error: data: data.paths[1] \"" + dir + "/nope\" has no " + dir +
                                    "/nope.idx; prepare it with `kiln data prepare --input TEXT --tokenizer TOKENIZER "
                                    "--output PREFIX` (docs/data.md)\n");
  const CommandResult a_string = run_command(kiln + " train --no-store --set data.paths=" + prefix);
  EXPECT_EQ(a_string.output, "kiln: error: config: data.paths must be an array of strings, e.g. [\"data/kjv-bpe\"], got \"" +
                                 prefix + "\"\n");
}

TEST(TrainCli, DataShorterThanOneSampleIsRefused) {
  const std::string prefix = prepare_corpus(fresh_dir("short_data"));
  const CommandResult r = run_command(kiln + " train" + unrecorded_run(prefix) +
                                      " --set model.seq_len=4096");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("fewer than one sample"), std::string::npos) << r.output;
}

TEST(TrainCli, ALayoutThatDoesNotFitTheProcessesIsRefused) {
  const CommandResult r = run_command(kiln + " train --set parallel.tp=2");
  EXPECT_EQ(r.output,
            "kiln: error: parallel: 1 process does not fit parallel.tp=2 x parallel.pp=1 = 2: the "
            "world size must be a multiple of 2 (data-parallel size = world / 2)\n");
}

TEST(TrainCli, CudaWithoutGpuIsRefused) {
#ifdef KILN_HAVE_CUDA
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
#endif
  const CommandResult r = run_command(kiln + " train --set backend.device=cuda");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("backend.device=cuda"), std::string::npos) << r.output;
}

TEST(TrainCli, PrintConfigShowsEmbeddedDefaults) {
  const CommandResult r = run_command(kiln + " train --print-config --set train.lr=0.001");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"lr\": 0.001"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"arch\": \"gpt2\""), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// Ctrl-C stops at the next step boundary: a final progress line, a message, exit 130.
TEST(TrainCli, InterruptStopsCleanly) {
  const std::string dir = fresh_dir("interrupt");
  const std::string prefix = prepare_corpus(dir);
  const std::string log = dir + "/train.log";
  const std::string script =
      kiln + " train" + unrecorded_run(prefix) + " --set train.steps=100000 --set train.log_interval=1"
      " >" + log + " 2>&1 & pid=$!; "
      "for i in $(seq 200); do grep -q '^step' " + log + " && break; sleep 0.1; done; "
      "kill -INT $pid; wait $pid; echo exit=$?";
  std::ofstream(dir + "/interrupt.sh") << script << "\n";
  const CommandResult r = run_command("sh " + dir + "/interrupt.sh");
  EXPECT_NE(r.output.find("exit=130"), std::string::npos) << r.output;
  const CommandResult logged = run_command("cat " + log);
  EXPECT_NE(logged.output.find("interrupted; stopped cleanly after step"), std::string::npos)
      << logged.output;
}

}  // namespace
}  // namespace kiln::test
