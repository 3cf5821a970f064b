// End-to-end, through the real binary: train.async_checkpoint writes an interval's checkpoint
// from a host copy on a thread of its own while the training goes on, into the same files a
// synchronous save writes (on one rank, on a model split over two, from a sharded optimizer),
// one at a time (the next waits and says so), recorded once it is in place; a run killed
// mid-write keeps its previous checkpoint whole and resumes from it, and a run interrupted
// mid-write finishes it first.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The small run, every step logged, no validation or sample, a checkpoint every 2 steps under
// `checkpoints`, asynchronous or not.
std::string checkpointed_run(const std::string& prefix, const std::string& checkpoints, int steps, bool async) {
  return small_run(prefix) + " --set train.steps=" + std::to_string(steps) +
         " --set train.log_interval=1 --set train.eval_interval=0 --set train.sample_tokens=0"
         " --set train.checkpoint_interval=2 --set train.checkpoint_dir=" + checkpoints +
         " --set train.async_checkpoint=" + (async ? "true" : "false");
}

std::set<std::string> folder_entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// Two checkpoints hold the same files: the same tensors byte for byte, the same state but for
// the setting that tells them apart.
void expect_same_checkpoint(const std::string& sync, const std::string& async) {
  ASSERT_TRUE(fs::exists(sync + "/manifest.json")) << sync;
  ASSERT_TRUE(fs::exists(async + "/manifest.json")) << async;
  EXPECT_EQ(folder_entries(sync), folder_entries(async));
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(read_text(sync + "/" + file) == read_text(async + "/" + file)) << async << "/" << file;
  nlohmann::json a = nlohmann::json::parse(read_text(sync + "/state.json"));
  nlohmann::json b = nlohmann::json::parse(read_text(async + "/state.json"));
  EXPECT_EQ(a["config"]["train"]["async_checkpoint"], false);
  EXPECT_EQ(b["config"]["train"]["async_checkpoint"], true);
  b["config"]["train"]["async_checkpoint"] = false;
  a["config"]["train"].erase("checkpoint_dir");
  b["config"]["train"].erase("checkpoint_dir");
  // The seconds the steps took (goodput's) are measured, each run its own.
  for (nlohmann::json* state : {&a, &b}) {
    EXPECT_TRUE(state->at("step_seconds").is_number()) << async;
    state->erase("step_seconds");
  }
  EXPECT_EQ(a, b) << async;
}

// Polls a background run's log until it holds `text`; false after `seconds`.
bool wait_for_text(const std::string& log, const std::string& text, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (read_text(log).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// The temporary folders of writes that did not end, under a run's checkpoint folder.
std::vector<std::string> unfinished_writes(const std::string& run_folder) {
  std::vector<std::string> found;
  for (const std::string& name : folder_entries(run_folder))
    if (name.rfind(".tmp-", 0) == 0) found.push_back(name);
  return found;
}

TEST(AsyncCheckpointCli, WritesTheFilesASynchronousSaveWritesAndResumesOnTheCurve) {
  const std::string dir = fresh_dir("async_checkpoint_same");
  const std::string prefix = prepare_corpus(dir);
  const CommandResult sync = run_command(kiln + " train --name same --store " + dir + "/sync.db" +
                                         checkpointed_run(prefix, dir + "/sync", 8, false));
  ASSERT_EQ(sync.exit_code, 0) << sync.output;
  const CommandResult async = run_command(kiln + " train --name same --store " + dir + "/async.db" +
                                          checkpointed_run(prefix, dir + "/async", 8, true));
  ASSERT_EQ(async.exit_code, 0) << async.output;
  EXPECT_EQ(sync.output.find("in the background"), std::string::npos) << sync.output;
  EXPECT_EQ(step_losses(async.output), step_losses(sync.output));

  // Steps 2, 4 and 6 in the background, each said when its copy is taken and when it is in
  // place; the last step's before the run ends, as ever.
  for (const char* step : {"2", "4", "6"}) {
    const std::string started = std::string("kiln: checkpoint step ") + step + " snapshot in ";
    const size_t at = async.output.find(started);
    ASSERT_NE(at, std::string::npos) << async.output;
    EXPECT_TRUE(std::regex_search(async.output.substr(at, async.output.find('\n', at) - at),
                                  std::regex("^kiln: checkpoint step \\d snapshot in \\d+\\.\\d\\d s, writing in the "
                                             "background$")))
        << async.output;
    EXPECT_TRUE(std::regex_search(async.output, std::regex("kiln: saved checkpoint " + dir + "/async/same/step-0000000" +
                                                           step + " \\([^)]+\\) in \\d+\\.\\d s in the background\n")))
        << async.output;
  }
  EXPECT_NE(async.output.find("kiln: saved checkpoint " + dir + "/async/same/step-00000008 ("), std::string::npos)
      << async.output;
  EXPECT_EQ(async.output.find("kiln: checkpoint step 8 snapshot"), std::string::npos) << async.output;
  for (const char* step : {"2", "4", "6", "8"}) {
    SCOPED_TRACE(step);
    expect_same_checkpoint(dir + "/sync/same/step-0000000" + std::string(step),
                           dir + "/async/same/step-0000000" + std::string(step));
  }
  EXPECT_EQ(read_text(dir + "/async/same/latest"), "step-00000008\n");
  EXPECT_TRUE(unfinished_writes(dir + "/async/same").empty());

  // Each is recorded once it is in place, with the layout it was written under.
  auto db = store::open_store(dir + "/async.db", store::Access::ReadOnly);
  const std::vector<store::Checkpoint> recorded = store::list_checkpoints(*db, store::resolve_run(*db, "same"));
  ASSERT_EQ(recorded.size(), 4u);
  for (size_t i = 0; i < recorded.size(); ++i) {
    EXPECT_EQ(recorded[i].step, static_cast<int64_t>(2 * i + 2));
    EXPECT_EQ(recorded[i].path, dir + "/async/same/step-0000000" + std::to_string(2 * i + 2));
    EXPECT_EQ(recorded[i].bytes, static_cast<int64_t>(fs::file_size(recorded[i].path + "/model.safetensors") +
                                                      fs::file_size(recorded[i].path + "/optimizer.safetensors") +
                                                      fs::file_size(recorded[i].path + "/state.json")));
  }

  // A run resumed from a checkpoint written in the background continues the curve bit for bit.
  const CommandResult resumed =
      run_command(kiln + " train --no-store --name fork --resume " + dir + "/async/same/step-00000004");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::vector<double> all = step_losses(sync.output), rest = step_losses(resumed.output);
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(rest, std::vector<double>(all.begin() + 4, all.end()));
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(read_text(dir + "/async/fork/step-00000008/" + file) ==
                read_text(dir + "/sync/same/step-00000008/" + file))
        << file;
}

// Two ranks: a model split over them is gathered whole at the step, and the gathered copy is
// what the thread writes; a sharded optimizer's state is gathered to rank 0 and copied from
// there. The same files again.
struct TwoRanks {
  std::string name;
  std::string settings;
};

void PrintTo(const TwoRanks& layout, std::ostream* os) { *os << layout.name; }

class AsyncCheckpointLayouts : public testing::TestWithParam<TwoRanks> {};

TEST_P(AsyncCheckpointLayouts, WriteTheFilesASynchronousSaveWrites) {
#ifndef KILN_HAVE_MPI
  GTEST_SKIP() << "skipped: built without MPI";
#endif
  const std::string dir = fresh_dir("async_checkpoint_" + GetParam().name);
  const std::string prefix = prepare_corpus(dir);
  const std::string layout = " --set model.n_layer=2 --set model.n_head=4" + GetParam().settings;
  const CommandResult sync = run_command(mpirun_command(2) + kiln + " train --no-store --name two" +
                                         checkpointed_run(prefix, dir + "/sync", 6, false) + layout);
  ASSERT_EQ(sync.exit_code, 0) << sync.output;
  const CommandResult async = run_command(mpirun_command(2) + kiln + " train --no-store --name two" +
                                          checkpointed_run(prefix, dir + "/async", 6, true) + layout);
  ASSERT_EQ(async.exit_code, 0) << async.output;
  EXPECT_EQ(step_losses(async.output), step_losses(sync.output));
  EXPECT_NE(async.output.find("kiln: checkpoint step 2 snapshot in "), std::string::npos) << async.output;
  EXPECT_NE(async.output.find("kiln: checkpoint step 4 snapshot in "), std::string::npos) << async.output;
  for (const char* step : {"2", "4", "6"}) {
    SCOPED_TRACE(step);
    expect_same_checkpoint(dir + "/sync/two/step-0000000" + std::string(step),
                           dir + "/async/two/step-0000000" + std::string(step));
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AsyncCheckpointLayouts,
                         testing::Values(TwoRanks{"tp2", " --set parallel.tp=2"},
                                         TwoRanks{"pp2", " --set parallel.pp=2"},
                                         TwoRanks{"dp2_distributed_optimizer",
                                                  " --set parallel.distributed_optimizer=true"}),
                         [](const testing::TestParamInfo<TwoRanks>& info) { return info.param.name; });

TEST(AsyncCheckpointCli, ACheckpointWaitsForTheOneBeingWrittenAndSaysHowLong) {
  const std::string dir = fresh_dir("async_checkpoint_waits");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  // Step 2's write takes 2 s longer; step 4 comes long before it ends.
  const CommandResult r = run_command("KILN_FAULTS=checkpoint@2:2 " + kiln + " train --name waits --store " + store +
                                      checkpointed_run(prefix, dir + "/checkpoints", 6, true));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: KILN_FAULTS plants a stop of 2 s in writing the checkpoint of step 2\n"),
            std::string::npos)
      << r.output;
  std::smatch waited;
  ASSERT_TRUE(std::regex_search(r.output, waited,
                                std::regex("kiln: checkpoint step 4 waited (\\d+\\.\\d) s for the checkpoint of step 2 "
                                           "to be written \\(one is written at a time\\)\n")))
      << r.output;
  EXPECT_GE(std::stod(waited[1]), 1.0) << r.output;
  EXPECT_LE(std::stod(waited[1]), 2.5) << r.output;
  // The training went on while step 2 was written; its line comes once it is in place.
  const size_t step3 = r.output.find("step 3/6"), saved2 = r.output.find("/checkpoints/waits/step-00000002 (");
  ASSERT_NE(step3, std::string::npos) << r.output;
  ASSERT_NE(saved2, std::string::npos) << r.output;
  EXPECT_LT(step3, saved2) << r.output;
  EXPECT_LT(saved2, r.output.find("kiln: checkpoint step 4 snapshot in ")) << r.output;
  auto db = store::open_store(store, store::Access::ReadOnly);
  const std::vector<store::Checkpoint> recorded = store::list_checkpoints(*db, store::resolve_run(*db, "waits"));
  ASSERT_EQ(recorded.size(), 3u);
  EXPECT_EQ(recorded[0].step, 2);
  EXPECT_EQ(recorded[1].step, 4);
  EXPECT_EQ(recorded[2].step, 6);
  EXPECT_EQ(read_text(dir + "/checkpoints/waits/latest"), "step-00000006\n");
}

TEST(AsyncCheckpointCli, ARunKilledMidWriteKeepsItsPreviousCheckpointAndResumesFromIt) {
  const std::string dir = fresh_dir("async_checkpoint_killed");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", log = dir + "/train.log";
  const std::string run_folder = dir + "/checkpoints/killed";
  // Step 4's write stops a minute after its first tensor: the run is killed in it.
  const int pid = start_background("env KILN_FAULTS=checkpoint@4:60 " + kiln + " train --name killed --store " + store +
                                       checkpointed_run(prefix, dir + "/checkpoints", 40, true),
                                   log);
  // Step 6 trained while step 4 was written, and its own checkpoint waits for it.
  ASSERT_TRUE(wait_for_text(log, "step  6/40", 60)) << read_text(log);
  ASSERT_TRUE(wait_for_text(log, "kiln: saved checkpoint " + run_folder + "/step-00000002 (", 10)) << read_text(log);
  ASSERT_EQ(unfinished_writes(run_folder).size(), 1u) << read_text(log);
  // The store has what the run queued before step 5's row: step 2's checkpoint.
  ASSERT_TRUE(wait_for_step_after(store, "killed", 4)) << read_text(log);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);

  // Step 4 never took its name; `latest` still names step 2, whole, and step 4's half-written
  // folder holds a tensor file and no manifest.
  EXPECT_FALSE(fs::exists(run_folder + "/step-00000004"));
  EXPECT_EQ(read_text(run_folder + "/latest"), "step-00000002\n");
  const std::vector<std::string> debris = unfinished_writes(run_folder);
  ASSERT_EQ(debris.size(), 1u);
  EXPECT_EQ(debris[0].rfind(".tmp-step-00000004-", 0), 0u) << debris[0];
  EXPECT_TRUE(fs::exists(run_folder + "/" + debris[0] + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(run_folder + "/" + debris[0] + "/manifest.json"));
  {
    auto db = store::open_store(store, store::Access::ReadOnly);
    const std::vector<store::Checkpoint> recorded = store::list_checkpoints(*db, store::resolve_run(*db, "killed"));
    ASSERT_EQ(recorded.size(), 1u);
    EXPECT_EQ(recorded[0].step, 2);
  }

  const CommandResult resumed = run_command(kiln + " train --no-store --resume " + run_folder +
                                            " --set train.steps=8 --set train.async_checkpoint=false");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("kiln: resumed from " + run_folder + "/step-00000002 at step 2\n"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("step 8/8"), std::string::npos) << resumed.output;
  EXPECT_EQ(read_text(run_folder + "/latest"), "step-00000008\n");
  EXPECT_TRUE(unfinished_writes(run_folder).empty());  // the next write cleared it
}

TEST(AsyncCheckpointCli, ARunInterruptedMidWriteFinishesItBeforeItEnds) {
  const std::string dir = fresh_dir("async_checkpoint_interrupted");
  const std::string prefix = prepare_corpus(dir), log = dir + "/train.log";
  const std::string run_folder = dir + "/checkpoints/stopped";
  const int pid = start_background("env KILN_FAULTS=checkpoint@4:3 " + kiln + " train --no-store --name stopped" +
                                       checkpointed_run(prefix, dir + "/checkpoints", 1000000, true),
                                   log);
  ASSERT_TRUE(wait_for_text(log, "kiln: checkpoint step 4 snapshot in ", 60)) << read_text(log);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(pid), 130) << read_text(log);  // as after Ctrl-C
  const std::string output = read_text(log);
  std::smatch stopped;
  ASSERT_TRUE(std::regex_search(output, stopped, std::regex("kiln: interrupted; stopped cleanly after step (\\d+)\n")))
      << output;
  const int64_t last = std::stoll(stopped[1]);
  EXPECT_NE(output.find("kiln: saved checkpoint " + run_folder + "/step-00000004 ("), std::string::npos) << output;
  const std::string name = fmt::format("step-{:08d}", last);
  EXPECT_TRUE(fs::exists(run_folder + "/" + name + "/manifest.json")) << output;
  EXPECT_TRUE(fs::exists(run_folder + "/step-00000004/manifest.json")) << output;
  EXPECT_EQ(read_text(run_folder + "/latest"), name + "\n");
  EXPECT_TRUE(unfinished_writes(run_folder).empty()) << output;
}

}  // namespace
}  // namespace kiln::test
