// End-to-end, through the real binary: the edges docs/security.md#text-on-terminals-names-and-values
// draws. Text from users and models is shown on a terminal, never obeyed by it (and kept as
// data in the store and JSON); a name cannot read as an option; the learning-rate scale has
// one range, the same for steering (forced or not) and for the checkpoint that holds it.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "store/commands.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What a hostile writer of the store puts in text: an OSC that retitles the terminal, a colour,
// BEL and a C1 CSI. The shell writes it with printf, as a user could type it.
constexpr const char* kHostilePrintf = R"(\033]0;owned\007\033[31mred\302\233)";
const std::string kHostile = "\x1b]0;owned\x07\x1b[31mred\xc2\x9b";
const std::string kShown = R"(\x1b]0;owned\x07\x1b[31mred\u009b)";

// A store holding one run "steered" with train.lr 0.001 over 100 steps, and a sample the model
// wrote with control characters in it.
std::string edges_store_with_a_run(const std::string& dir) {
  const std::string path = dir + "/runs.db";
  store::RunWriter writer(path);
  store::RunInfo info;
  info.name = "steered";
  info.config_json = R"({"train":{"lr":0.001,"steps":100}})";
  writer.create_run(info);
  store::Sample sample;
  sample.step = 10;
  sample.prompt = "In the";
  sample.text = " beginning\n" + kHostile;
  sample.temperature = 1;
  writer.log_samples({sample});
  writer.flush();
  return path;
}

bool has_control_byte(const std::string& text) {
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && c != '\n') || b == 0x7f) return true;
  }
  return text.find("\xc2\x9b") != std::string::npos;
}

TEST(SecurityEdgesCli, ControlCharactersInTagsNotesAndSamplesAreShownNotObeyed) {
  const std::string dir = fresh_dir("edges_control");
  const std::string store = edges_store_with_a_run(dir), on = " --store " + store;
  const std::string hostile = std::string("\"$(printf '") + kHostilePrintf + "')\"";
  const CommandResult tagged = run_command(kiln + " runs tag steered " + hostile + on);
  ASSERT_EQ(tagged.exit_code, 0) << tagged.output;
  EXPECT_EQ(tagged.output, "run 1 (steered) tags: " + kShown + "\n");
  ASSERT_EQ(run_command(kiln + " runs note steered " + hostile + on).exit_code, 0);

  const CommandResult shown = run_command(kiln + " runs show steered" + on);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_FALSE(has_control_byte(shown.output)) << shown.output;
  EXPECT_NE(shown.output.find("  tags:      " + kShown + "\n"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("  notes:     " + kShown + "\n"), std::string::npos) << shown.output;
  // A sample keeps its line breaks: it is a block of text.
  EXPECT_NE(shown.output.find("  In the beginning\n  " + kShown + "\n"), std::string::npos) << shown.output;
  const CommandResult listed = run_command(kiln + " runs list" + on);
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_FALSE(has_control_byte(listed.output)) << listed.output;
  EXPECT_NE(listed.output.find(kShown), std::string::npos) << listed.output;
  // An error quoting what it refused shows it the same way.
  const CommandResult unknown = run_command(kiln + " runs show " + hostile + on);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_FALSE(has_control_byte(unknown.output)) << unknown.output;

  // The store and JSON keep the text as it was written: it is data.
  const CommandResult as_json = run_command(kiln + " runs show steered --json" + on);
  ASSERT_EQ(as_json.exit_code, 0) << as_json.output;
  const json run = json::parse(as_json.output);
  EXPECT_EQ(run["tags"], json::array({kHostile}));
  EXPECT_EQ(run["notes"], kHostile);
}

TEST(SecurityEdgesCli, ANameThatReadsAsAnOptionIsRefused) {
  const std::string dir = fresh_dir("edges_names");
  const std::string prefix = prepare_corpus(dir);
  const std::string run = small_run(prefix) + " --set train.checkpoint_dir=" + dir + "/checkpoints --store " + dir + "/runs.db";
  const CommandResult refused = run_command(kiln + " train --name=-rf" + run);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.output,
            "kiln: error: store: run name '-rf' starts with '-', which reads as an option on a command line; start it "
            "with a letter or digit\n");
  const CommandResult sweep =
      run_command(kiln + " sweep --name=--force --grid train.lr=1e-3,2e-3" + run);
  EXPECT_EQ(sweep.exit_code, 1);
  EXPECT_EQ(sweep.output,
            "kiln: error: store: run name '--force' starts with '-', which reads as an option on a command line; "
            "start it with a letter or digit\n");
  EXPECT_FALSE(fs::exists(dir + "/runs.db")) << "refused before anything was recorded";
  EXPECT_FALSE(fs::exists(dir + "/checkpoints"));
}

TEST(SecurityEdgesCli, TheLearningRateScaleHasOneRangeForcedOrNot) {
  const std::string dir = fresh_dir("edges_lr_scale");
  const std::string store = edges_store_with_a_run(dir);
  const std::string set = kiln + " runs set steered --store " + store + " ";
  // Past what a checkpoint may hold, --force does not help: the run would take it and its
  // next checkpoint would then be refused on resume.
  const CommandResult huge = run_command(set + "train.lr_scale=1e308 --force");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_EQ(huge.output,
            "kiln: error: train.lr_scale=1e308 is outside what a run can hold: above 0 and at most 1000, even with "
            "--force\n");
  const CommandResult huge_lr = run_command(set + "train.lr=2 --force");
  EXPECT_EQ(huge_lr.output,
            "kiln: error: train.lr=2 is outside what a run can hold: at most 1000x the run's configured peak 0.001, "
            "even with --force\n");
  // The range error shows the value as it was given.
  EXPECT_EQ(run_command(set + "train.lr=1e300").output,
            "kiln: error: train.lr=1e300 is outside what a run can hold: at most 1000x the run's configured peak "
            "0.001, even with --force\n");
  EXPECT_EQ(run_command(set + "train.lr=0.5").output,
            "kiln: error: train.lr=0.5 is outside its range: above 0 and at most 0.01 (10x the run's configured peak "
            "0.001); add --force to set it anyway\n");
  // A denormal rate is a typo: refused unless forced.
  const CommandResult denormal = run_command(set + "train.lr=1e-310");
  EXPECT_EQ(denormal.exit_code, 1);
  EXPECT_EQ(denormal.output,
            "kiln: error: train.lr=1e-310 is outside its range: a normal number, at least 2.22507e-308 (this one is "
            "denormal); add --force to set it anyway\n");
  EXPECT_EQ(run_command(set + "train.lr_scale=1000 --force").exit_code, 0);
  EXPECT_EQ(run_command(set + "train.lr=1e-310 --force").exit_code, 0);
  auto db = store::open_store(store, store::Access::ReadOnly);
  const auto commands = store::list_commands(*db, store::resolve_run(*db, "steered"));
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].argument, "train.lr_scale=1000");
  EXPECT_EQ(commands[1].argument, "train.lr=1e-310");
}

// The bound is the checkpoint's: a run forced to the largest scale steering allows writes a
// checkpoint that resumes.
TEST(SecurityEdgesCli, ARunAtTheLargestScaleResumesFromItsCheckpoint) {
  const std::string dir = fresh_dir("edges_lr_resume");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const std::string checkpoints = " --set train.checkpoint_dir=" + dir + "/checkpoints";
  const int pid = start_background(kiln + " train --store " + store + " --name scaled" + small_run(prefix) + checkpoints +
                                       " --set train.steps=1000000 --set train.eval_interval=0 --set train.sample_tokens=0"
                                       " --set alerts.enabled=false",
                                   dir + "/scaled.log");
  ASSERT_TRUE(wait_for_step_after(store, "scaled", 0)) << read_text(dir + "/scaled.log");
  const CommandResult set = run_command(kiln + " runs set scaled train.lr_scale=1000 --force --wait 60 --store " + store);
  ASSERT_EQ(set.exit_code, 0) << set.output << read_text(dir + "/scaled.log");
  const CommandResult stopped = run_command(kiln + " runs release scaled --wait 60 --store " + store);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output << read_text(dir + "/scaled.log");
  EXPECT_EQ(wait_exit(pid), 0) << read_text(dir + "/scaled.log");
  const CommandResult resumed = run_command(kiln + " train --store " + store + " --resume " + dir +
                                            "/checkpoints/scaled --set train.steps=1000000 --set train.sample_tokens=0"
                                            " --set train.eval_interval=0 --print-config");
  EXPECT_EQ(resumed.exit_code, 0) << "the checkpoint's state is accepted: " << resumed.output;
}

}  // namespace
}  // namespace kiln::test
