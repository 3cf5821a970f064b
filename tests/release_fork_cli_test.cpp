// End-to-end: kiln runs release ends a live run as released after a checkpoint, kiln runs
// resume starts it again as the same run and it continues the curve bit for bit on the CPU,
// and kiln runs fork starts a new run from a checkpoint whose first step is the parent's next.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

// Every step logged, at a constant learning rate, `steps` steps (the data's order depends on
// the steps a run is set to, so a resumed run and its reference train the same number).
std::string steady(const std::string& prefix, const std::string& dir, int steps) {
  return small_run(prefix) + " --set train.steps=" + std::to_string(steps) +
         " --set train.log_interval=1 --set train.eval_interval=0"
         " --set train.decay=constant --set train.warmup=0 --set train.sample_tokens=0"
         " --set train.checkpoint_dir=" + dir + "/checkpoints";
}

std::vector<store::MetricRow> rows_of(const std::string& path, const std::string& run) {
  auto db = store::open_store(path, store::Access::ReadOnly);
  std::vector<store::MetricRow> rows;
  store::for_each_metric(*db, store::resolve_run(*db, run), [&](const store::MetricRow& r) { rows.push_back(r); });
  return rows;
}

store::RunRecord record_of(const std::string& path, const std::string& run) {
  auto db = store::open_store(path, store::Access::ReadOnly);
  return store::get_run(*db, store::resolve_run(*db, run));
}

TEST(ReleaseForkCli, AReleasedRunResumesAsTheSameRunAndContinuesItsCurveBitForBit) {
  const std::string dir = fresh_dir("release_resume");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", log = dir + "/train.log";
  // Some hundred steps of about 10 ms (a wider model than the small run's), long enough for
  // the pause below to land well before the end; started from another folder than the one
  // kiln runs resume runs in: it goes back there.
  constexpr int kSteps = 600;
  const std::string wider = " --set model.n_layer=2 --set model.d_model=128 --set model.n_head=4 --set model.seq_len=64";
  const std::string work = dir + "/work";
  fs::create_directories(work);
  const int pid = start_background("env -C " + work + " " + kiln + " train --name live --tag keep --store " + store +
                                       steady(prefix, dir, kSteps) + wider,
                                   log);
  ASSERT_TRUE(wait_for_step_after(store, "live", 2)) << read_text(log);
  // Held first, so the release cannot miss the run's last step; a paused run releases too.
  const CommandResult pause = run_command(kiln + " runs pause live --store " + store + " --wait 30");
  ASSERT_EQ(pause.exit_code, 0) << pause.output << read_text(log);
  const CommandResult release = run_command(kiln + " runs release live --store " + store + " --wait 30");
  ASSERT_EQ(release.exit_code, 0) << release.output << read_text(log);
  EXPECT_NE(release.output.find("released; continue it with: kiln runs resume live"), std::string::npos)
      << release.output;
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
  const store::RunRecord released = record_of(store, "live");
  ASSERT_EQ(released.status, store::RunStatus::Released);
  ASSERT_TRUE(released.last_step);
  const int64_t at = *released.last_step;
  ASSERT_LT(at, kSteps);
  EXPECT_NE(read_text(log).find("kiln: released after step " + std::to_string(at)), std::string::npos)
      << read_text(log);
  EXPECT_EQ(released.workdir, work);
  EXPECT_EQ(released.world_size, 1);
  const std::string checkpoint = dir + "/checkpoints/live/step-" + fmt::format("{:08d}", at);
  EXPECT_TRUE(fs::exists(checkpoint + "/manifest.json"));

  // Resumed from there to the end; the run goes on in the store under its id.
  const CommandResult resume = run_command(kiln + " runs resume live --store " + store);
  ASSERT_EQ(resume.exit_code, 0) << resume.output;
  EXPECT_NE(resume.output.find("kiln: resuming run " + std::to_string(released.id) + " ('live') from " + checkpoint +
                               " (step " + std::to_string(at) + ") in " + work + " as 1 rank"),
            std::string::npos)
      << resume.output;
  const store::RunRecord resumed = record_of(store, "live");
  EXPECT_EQ(resumed.id, released.id);
  EXPECT_EQ(resumed.status, store::RunStatus::Completed);
  EXPECT_EQ(resumed.tags, std::vector<std::string>{"keep"});
  EXPECT_EQ(resumed.last_step, kSteps);

  // The reference: the same run straight through.
  const CommandResult straight =
      run_command(kiln + " train --name straight --store " + store + steady(prefix, dir, kSteps) + wider);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto a = rows_of(store, "live"), b = rows_of(store, "straight");
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.size(), a.size());
  int differing = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].step, b[i].step);
    // exact, not near
    if (a[i].loss != b[i].loss || a[i].grad_norm != b[i].grad_norm) ++differing;
  }
  EXPECT_EQ(differing, 0) << "steps whose loss or gradient norm differ from the run that never stopped";
}

// Two data-parallel ranks: the run records its world size, and kiln runs resume starts it
// again under mpirun as two ranks, which continue the curve of a run that never stopped.
TEST(ReleaseForkCli, ATwoRankRunResumesUnderMpirunAsTwoRanks) {
  const std::string dir = fresh_dir("release_mpi");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", log = dir + "/train.log";
  constexpr int kSteps = 300;
  const std::string wider = " --set model.n_layer=2 --set model.d_model=128 --set model.n_head=4 --set model.seq_len=64";
  const int pid = start_background(mpirun_command(2) + kiln + " train --name pair --store " + store +
                                       steady(prefix, dir, kSteps) + wider,
                                   log);
  ASSERT_TRUE(wait_for_step_after(store, "pair", 2)) << read_text(log);
  ASSERT_EQ(run_command(kiln + " runs pause pair --store " + store + " --wait 30").exit_code, 0) << read_text(log);
  const CommandResult release = run_command(kiln + " runs release pair --store " + store + " --wait 30");
  ASSERT_EQ(release.exit_code, 0) << release.output << read_text(log);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
  const store::RunRecord released = record_of(store, "pair");
  ASSERT_EQ(released.status, store::RunStatus::Released);
  EXPECT_EQ(released.world_size, 2);

  // kiln train --ranks 2 starts mpirun as this machine needs it (as root too).
  const CommandResult resume = run_command(kiln + " runs resume pair --store " + store);
  ASSERT_EQ(resume.exit_code, 0) << resume.output;
  EXPECT_NE(resume.output.find(" as 2 ranks\nkiln: " + kiln + " train --resume="), std::string::npos) << resume.output;
  EXPECT_NE(resume.output.find(" --ranks=2"), std::string::npos) << resume.output;
  const store::RunRecord resumed = record_of(store, "pair");
  EXPECT_EQ(resumed.status, store::RunStatus::Completed);
  EXPECT_EQ(resumed.layout, released.layout);

  const CommandResult straight = run_command(mpirun_command(2) + kiln + " train --name straight --store " + store +
                                             steady(prefix, dir, kSteps) + wider);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto a = rows_of(store, "pair"), b = rows_of(store, "straight");
  ASSERT_EQ(a.size(), static_cast<size_t>(2 * kSteps));  // a row per rank per step
  ASSERT_EQ(b.size(), a.size());
  int differing = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].step != b[i].step || a[i].rank != b[i].rank || a[i].loss != b[i].loss) ++differing;
  EXPECT_EQ(differing, 0) << "rows whose loss differs from the run that never stopped";
}

TEST(ReleaseForkCli, AForkStartsFromTheCheckpointAtOrBeforeTheStepAndRecordsItsParent) {
  const std::string dir = fresh_dir("fork");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const std::string run = steady(prefix, dir, 8) + " --set train.checkpoint_interval=3";
  ASSERT_EQ(run_command(kiln + " train --name parent --store " + store + run).exit_code, 0);

  // Nothing changed: the fork's first step is the parent's next, exactly.
  const CommandResult same = run_command(kiln + " runs fork parent --step 5 --store " + store);
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("kiln: forking run 1 ('parent') from " + dir + "/checkpoints/parent/step-00000003 (step 3)"),
            std::string::npos)
      << same.output;
  const store::RunRecord child = record_of(store, "parent-fork-3");
  EXPECT_EQ(child.parent_id, 1);
  EXPECT_EQ(child.parent_step, 3);
  EXPECT_EQ(child.status, store::RunStatus::Completed);
  const auto parent_rows = rows_of(store, "parent"), child_rows = rows_of(store, "parent-fork-3");
  ASSERT_EQ(child_rows.size(), 5u);  // steps 4..8
  for (size_t i = 0; i < child_rows.size(); ++i) {
    EXPECT_EQ(child_rows[i].step, parent_rows[i + 3].step);
    EXPECT_EQ(child_rows[i].loss, parent_rows[i + 3].loss) << "step " << child_rows[i].step;
  }

  // Changed settings, under a name of its own: a new learning rate from the first step on.
  const CommandResult changed =
      run_command(kiln + " runs fork parent --step 6 --name slower --set train.lr=0.0005 --store " + store);
  ASSERT_EQ(changed.exit_code, 0) << changed.output;
  const store::RunRecord slower = record_of(store, "slower");
  EXPECT_EQ(slower.parent_id, 1);
  EXPECT_EQ(slower.parent_step, 6);
  const auto slower_rows = rows_of(store, "slower");
  ASSERT_EQ(slower_rows.size(), 2u);
  EXPECT_EQ(slower_rows[0].step, 7);
  EXPECT_DOUBLE_EQ(slower_rows[0].lr, 0.0005);
  EXPECT_EQ(slower_rows[0].loss, parent_rows[6].loss) << "the step's loss is before its update";
  EXPECT_NE(slower_rows[1].loss, parent_rows[7].loss);
}

TEST(ReleaseForkCli, BadRequestsAreOneLineAndStartNothing) {
  const std::string dir = fresh_dir("fork_bad");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  // Every run keeps its final checkpoint; this one's could not be written (its folder would be
  // inside a file), which a run survives with a warning.
  const CommandResult plain = run_command(kiln + " train --name plain --store " + store + steady(prefix, dir, 4) +
                                          " --set train.checkpoint_dir=" + store + "/checkpoints");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_NE(plain.output.find("kiln: warning: "), std::string::npos) << plain.output;
  ASSERT_EQ(run_command(kiln + " train --name kept --store " + store + steady(prefix, dir, 4) +
                        " --set train.checkpoint_interval=2")
                .exit_code,
            0);
  const auto error_of = [&](const std::string& args) {
    const CommandResult r = run_command(kiln + " runs " + args + " --store " + store);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    return r.output;
  };
  EXPECT_EQ(error_of("fork plain --step 3"),
            "kiln: error: run 1 ('plain') wrote no checkpoint to start from: it ended before its first, or could not "
            "write it\n");
  EXPECT_EQ(error_of("fork kept --step 1"),
            "kiln: error: run 2 ('kept') has no checkpoint at or before step 1 on disk (it recorded steps 4, 2; a "
            "deleted or moved folder cannot be used)\n");
  EXPECT_EQ(error_of("fork kept --step 2 --name plain"), "kiln: error: a run named 'plain' already exists; choose another --name\n");
  EXPECT_EQ(error_of("fork kept --step 2 --name ../x").rfind("kiln: error: store: ", 0), 0u);
  EXPECT_EQ(error_of("fork kept --step 2 --set train.lr"), "kiln: error: --set train.lr: expected key=value\n");
  EXPECT_EQ(error_of("fork nope --step 2").rfind("kiln: error: store: no run", 0), 0u);
  EXPECT_EQ(error_of("resume kept --ranks -2"), "kiln: error: --ranks -2: expected a number of processes of 1 or more\n");
  auto db = store::open_store(store, store::Access::ReadOnly);
  EXPECT_EQ(store::list_runs(*db).size(), 2u) << "nothing was started";
}

}  // namespace
}  // namespace kiln::test
