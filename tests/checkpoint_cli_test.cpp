// End-to-end: checkpoints written by kiln train resume bit for bit, are written by the stop
// and checkpoint commands, and a damaged one is refused with one line.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>

#include "base/check.h"
#include "trainer/checkpoint/durable_file.h"
#include "store/commands.h"
#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Eight steps of the small run with every step logged, validation off.
std::string eight_steps(const std::string& prefix, const std::string& dir) {
  return small_run(prefix) + " --set train.steps=8 --set train.log_interval=1"
         " --set train.eval_interval=0 --set train.sample_tokens=0"
         " --set train.checkpoint_dir=" + dir + "/checkpoints";
}

std::vector<store::MetricRow> checkpoint_rows_of(const std::string& path, const std::string& run) {
  auto db = store::open_store(path, store::Access::ReadOnly);
  std::vector<store::MetricRow> rows;
  store::for_each_metric(*db, store::resolve_run(*db, run),
                         [&](const store::MetricRow& r) { rows.push_back(r); });
  return rows;
}

TEST(CheckpointCli, AResumedRunContinuesTheCurveBitForBit) {
  const std::string dir = fresh_dir("ckpt_exact");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const std::string run = eight_steps(prefix, dir) + " --store " + store;
  const CommandResult full =
      run_command(kiln + " train --name full" + run + " --set train.checkpoint_interval=4");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_NE(full.output.find("kiln: saved checkpoint " + dir + "/checkpoints/full/step-00000004"),
            std::string::npos)
      << full.output;

  // A second run, forked from step 4 under another name: same config, from the checkpoint.
  const CommandResult resumed = run_command(kiln + " train --name fork --store " + store +
                                            " --resume " + dir + "/checkpoints/full/step-00000004");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("kiln: resumed from " + dir +
                                "/checkpoints/full/step-00000004 at step 4"),
            std::string::npos)
      << resumed.output;
  const auto a = checkpoint_rows_of(store, "full"), b = checkpoint_rows_of(store, "fork");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(b[i].step, a[i + 4].step);
    EXPECT_EQ(b[i].loss, a[i + 4].loss) << "step " << b[i].step;  // exact, not near
    EXPECT_EQ(b[i].grad_norm, a[i + 4].grad_norm) << "step " << b[i].step;
    EXPECT_EQ(b[i].lr, a[i + 4].lr);
    EXPECT_EQ(b[i].tokens, a[i + 4].tokens);
  }
  // And the weights and optimizer state at the end are the same bytes.
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(read_text(dir + "/checkpoints/full/step-00000008/" + file),
              read_text(dir + "/checkpoints/fork/step-00000008/" + file))
        << file;
}

// A completed run's latest checkpoint trained further from the command line is another
// training: a run of its own whose parent is the completed one (kiln runs resume continues the
// run itself; docs/checkpoints.md#resuming).
TEST(CheckpointCli, ResumingACompletedRunsLatestWithMoreStepsIsAChildRun) {
  const std::string dir = fresh_dir("ckpt_latest");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  ASSERT_EQ(run_command(kiln + " train --name grow" + eight_steps(prefix, dir) +
                        " --set train.checkpoint_interval=4 --store " + store)
                .exit_code,
            0);
  const CommandResult more = run_command(kiln + " train --resume latest --set train.steps=12" +
                                         " --set train.checkpoint_dir=" + dir + "/checkpoints" +
                                         " --store " + store);
  ASSERT_EQ(more.exit_code, 0) << more.output;
  EXPECT_NE(more.output.find("kiln: run 'grow' (id 1) has ended (completed) and this training changes its config, so "
                             "this training is a new run 'grow-2' (its parent: 'grow' at step 8); kiln runs resume "
                             "grow continues that run itself\n"),
            std::string::npos)
      << more.output;
  EXPECT_NE(more.output.find("kiln: recording run 2 'grow-2'"), std::string::npos) << more.output;
  // The schedule was for 8 steps: over 12 the cosine decays later, and the run says so.
  EXPECT_NE(more.output.find("kiln: warning: resuming " + dir +
                             "/checkpoints/grow/step-00000008 with a changed schedule (train.steps 8 -> 12): the "
                             "learning rate at step 9 is "),
            std::string::npos)
      << more.output;
  EXPECT_NE(more.output.find("step  9/12"), std::string::npos) << more.output;
  auto db = store::open_store(store, store::Access::ReadOnly);
  ASSERT_EQ(store::list_runs(*db).size(), 2u);
  const store::RunRecord grow = store::get_run(*db, 1);
  EXPECT_EQ(grow.status, store::RunStatus::Completed);
  EXPECT_EQ(grow.last_step, 8);
  EXPECT_EQ(store::list_checkpoints(*db, 1).size(), 2u);  // steps 4 and 8
  const store::RunRecord child = store::get_run(*db, 2);
  EXPECT_EQ(child.name, "grow-2");
  EXPECT_EQ(child.status, store::RunStatus::Completed);
  EXPECT_EQ(child.last_step, 12);
  EXPECT_EQ(child.parent_id, 1);
  EXPECT_EQ(child.parent_step, 8);
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/grow-2/step-00000012/manifest.json"));
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/grow/step-00000012"));
}

TEST(CheckpointCli, StopAndCheckpointCommandsWriteCheckpoints) {
  const std::string dir = fresh_dir("ckpt_commands");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const std::string log = dir + "/train.log";
  const int pid = start_background(kiln + " train --name live --store " + store +
                                       eight_steps(prefix, dir) + " --set train.steps=1000000",
                                   log);
  // The run is in the store once it has logged a step (the store file comes a moment before).
  ASSERT_TRUE(wait_for_step_after(store, "live", 0)) << read_text(log);
  const CommandResult checkpoint =
      run_command(kiln + " runs checkpoint live --store " + store + " --wait 30");
  ASSERT_EQ(checkpoint.exit_code, 0) << checkpoint.output << read_text(log);
  const CommandResult stop = run_command(kiln + " runs stop live --store " + store + " --wait 30");
  ASSERT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);

  auto db = store::open_store(store, store::Access::ReadOnly);
  const auto checkpoints = store::list_checkpoints(*db, 1);
  ASSERT_EQ(checkpoints.size(), 2u);
  EXPECT_TRUE(fs::exists(checkpoints[1].path + "/manifest.json"));
  const auto commands = store::list_commands(*db, 1);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].reason, "checkpoint; wrote " + checkpoints[0].path);
  EXPECT_EQ(commands[1].reason, "stopping; wrote " + checkpoints[1].path);
  EXPECT_EQ(*commands[1].applied_step, checkpoints[1].step);
  EXPECT_EQ(store::get_run(*db, 1).status, store::RunStatus::Stopped);
}

TEST(CheckpointCli, ADamagedCheckpointOrAnotherModelIsRefusedInOneLine) {
  const std::string dir = fresh_dir("ckpt_refused");
  const std::string prefix = prepare_corpus(dir);
  ASSERT_EQ(run_command(kiln + " train --no-store --name base" + eight_steps(prefix, dir) +
                        " --set train.checkpoint_interval=8")
                .exit_code,
            0);
  const std::string checkpoint = dir + "/checkpoints/base/step-00000008";
  // The same config but for one more layer, given as a file: refused before anything runs.
  const CommandResult other =
      run_command(kiln + " train --no-store --config " KILN_SOURCE_DIR "/configs/tiny.json" +
                  eight_steps(prefix, dir) + " --set model.n_layer=2 --set train.steps=12 --resume " +
                  checkpoint);
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_EQ(other.output, "kiln: error: checkpoint: " + checkpoint +
                              " holds another model: model.n_layer is 1 there, 2 here\n");

  const CommandResult done = run_command(kiln + " train --no-store --resume " + checkpoint);
  EXPECT_EQ(done.exit_code, 1);
  EXPECT_EQ(done.output, "kiln: error: checkpoint " + checkpoint +
                             " is at step 8, and train.steps=8 leaves nothing to train; raise "
                             "train.steps\n");

  std::ofstream(checkpoint + "/optimizer.safetensors", std::ios::app) << "garbage";
  const CommandResult damaged =
      run_command(kiln + " train --no-store --resume " + checkpoint + " --set train.steps=9");
  EXPECT_EQ(damaged.exit_code, 1);
  EXPECT_EQ(damaged.output.rfind("kiln: error: checkpoint: " + checkpoint +
                                     "/optimizer.safetensors is damaged: ",
                                 0),
            0u)
      << damaged.output;
  EXPECT_EQ(damaged.output.find('\n'), damaged.output.size() - 1) << damaged.output;
}

// Rewrites one field of a checkpoint's state.json and its manifest entry, as a careless or
// hostile hand would, so that only kiln's own checks stand between it and a run.
void rewrite_state(const std::string& checkpoint, const std::string& field, const nlohmann::json& value) {
  const std::string state_path = checkpoint + "/state.json", manifest_path = checkpoint + "/manifest.json";
  nlohmann::json state = nlohmann::json::parse(read_text(state_path));
  state[field] = value;
  std::ofstream(state_path, std::ios::trunc) << state.dump(2) << "\n";
  nlohmann::json manifest = nlohmann::json::parse(read_text(manifest_path));
  manifest["files"]["state.json"] = {{"bytes", fs::file_size(state_path)}, {"sha256", sha256_of_file(state_path)}};
  std::ofstream(manifest_path, std::ios::trunc) << manifest.dump(2) << "\n";
}

TEST(CheckpointCli, ACheckpointsNamesAndNumbersAreCheckedBeforeTheyAreUsed) {
  const std::string dir = fresh_dir("ckpt_checked");
  const std::string prefix = prepare_corpus(dir);
  ASSERT_EQ(run_command(kiln + " train --no-store --name base" + eight_steps(prefix, dir) +
                        " --set train.checkpoint_interval=8")
                .exit_code,
            0);
  const std::string root = dir + "/checkpoints/base", checkpoint = root + "/step-00000008";
  const std::string resume = kiln + " train --no-store --set train.steps=9 --resume ";

  // A `latest` that names no checkpoint is refused without echoing its bytes.
  std::ofstream(root + "/latest", std::ios::trunc) << "../../../etc\x1b[31m";
  const CommandResult latest = run_command(resume + root);
  EXPECT_EQ(latest.exit_code, 1);
  EXPECT_EQ(latest.output, "kiln: error: --resume " + root +
                               ": its latest file does not name a checkpoint (expected step-NNNNNNNN); give a "
                               "checkpoint folder instead\n");

  // A recorded run name decides the folder the resumed run writes to: it must stay inside.
  rewrite_state(checkpoint, "run_name", "../../escape");
  const CommandResult escaping = run_command(resume + checkpoint);
  EXPECT_EQ(escaping.exit_code, 1);
  EXPECT_EQ(escaping.output, "kiln: error: checkpoint " + checkpoint +
                                 " records a run name kiln cannot use as a folder (store: run name '../../escape' "
                                 "starts with a dot; a run name names a folder, so it may not); resume it with "
                                 "--name NAME\n");
  const CommandResult renamed = run_command(resume + checkpoint + " --name renamed");
  ASSERT_EQ(renamed.exit_code, 0) << renamed.output;
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/renamed/step-00000009"));
  EXPECT_FALSE(fs::exists(dir + "/escape"));

  for (const auto& [field, value, why] :
       {std::tuple<std::string, nlohmann::json, std::string>{"step", -5, "step -5 is negative"},
        {"lr_scale", 1e300, "lr_scale 1e+300 is not a number above 0 and at most 1000"},
        {"lr_scale", 0, "lr_scale 0 is not a number above 0 and at most 1000"}}) {
    rewrite_state(checkpoint, "run_name", "base");
    rewrite_state(checkpoint, field, value);
    const CommandResult refused = run_command(resume + checkpoint);
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_EQ(refused.output, "kiln: error: checkpoint: " + checkpoint + "/state.json is damaged: " + why + "\n");
    rewrite_state(checkpoint, field, field == "step" ? nlohmann::json(8) : nlohmann::json(1.0));
  }
}

}  // namespace
}  // namespace kiln::test
