// End-to-end: kiln train --max-restarts supervises its ranks. A rank killed mid-run ends the
// attempt; the run starts again from its newest checkpoint as the same run, records the
// restart, reaches the same weights as a run that never failed, and says its goodput. A run
// whose rank 0 was killed before it could record the failure is recorded failed by the
// launcher. A run that fails before its first step is not started again (docs/resilience.md).
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include "store/rank_places.h"
#include "store/run_figures.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

// 120 steps, each logged, a checkpoint every 10.
std::string args(const std::string& prefix) {
  return small_run(prefix) + " --set train.steps=120 --set train.log_interval=1 --set train.checkpoint_interval=10" +
         " --set train.eval_interval=0 --set train.sample_tokens=0 --set parallel.timeout_s=5";
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string final_weights(const std::string& dir, const std::string& run) {
  return run_command("cat " + dir + "/checkpoints/" + run + "/step-00000120/*.safetensors | sha256sum").output;
}

// Starts `kiln train --ranks 2 OPTIONS` as run `name`, supervised, and kills `rank` with
// SIGKILL once the run has logged a step past `step`. Returns the launcher's pid; 0 (a test
// failure said) when the run never got there.
int start_and_kill(const std::string& store, const std::string& name, const std::string& options,
                   const std::string& log, int64_t step, size_t rank) {
  // Rank 0 working 40 ms longer every step paces the run, so the kill lands mid-run.
  const int launcher = start_background("env KILN_FAULTS=slow@0:40 " + kiln + " train --ranks 2 --store " + store +
                                            " --name " + name + " " + options,
                                        log);
  int64_t victim = 0;
  if (wait_for_step_after(store, name, step)) {
    auto db = store::open_store(store, store::Access::ReadOnly);
    victim = store::list_rank_places(*db, store::resolve_run(*db, name)).at(rank).pid.value_or(0);
  }
  if (victim <= 0 || kill(static_cast<pid_t>(victim), SIGKILL) != 0) {
    ADD_FAILURE() << "no rank " << rank << " to kill past step " << step << ": " << read_text(log);
    kill(launcher, SIGKILL);
    return 0;
  }
  return launcher;
}

TEST(Restart, AKilledRankRestartsTheRunFromItsCheckpointToTheSameWeights) {
  const std::string dir = fresh_dir("restart");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", log = dir + "/r.log";
  const CommandResult whole = run_command(kiln + " train --ranks 2 --no-store --name whole" + args(prefix));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const int launcher = start_and_kill(store, "r", "--max-restarts 2" + args(prefix), log, 25, 1);
  ASSERT_GT(launcher, 0);
  ASSERT_EQ(wait_exit(launcher), 0) << read_text(log);

  const std::string out = read_text(log);
  EXPECT_NE(out.find("kiln: the run failed (rank 1 on node "), std::string::npos) << out;
  EXPECT_NE(out.find("restarting it in 2 s\n"), std::string::npos) << out;
  EXPECT_NE(out.find("kiln: restart 1 of 2: from " + dir + "/checkpoints/r/step-000000"), std::string::npos) << out;
  EXPECT_NE(out.find("kiln: restart 1: training again at step "), std::string::npos) << out;
  EXPECT_NE(out.find("kiln: goodput "), std::string::npos) << out;
  EXPECT_EQ(final_weights(dir, "r"), final_weights(dir, "whole"));

  auto db = store::open_store(store, store::Access::ReadOnly);
  const int64_t id = store::resolve_run(*db, "r");
  const store::RunRecord run = store::get_run(*db, id);
  EXPECT_EQ(run.status, store::RunStatus::Completed);
  std::vector<store::Event> restarts;
  for (const store::Event& e : store::list_events(*db, id))
    if (e.kind == "restart") restarts.push_back(e);
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].message.rfind("restart 1 of 2 after: rank 1 on node ", 0), 0u) << restarts[0].message;
  EXPECT_NE(restarts[0].message.find(" exited on signal 9 (Killed); steps "), std::string::npos) << restarts[0].message;
  EXPECT_NE(restarts[0].message.find(" lost ("), std::string::npos) << restarts[0].message;
  EXPECT_NE(restarts[0].message.find("; from the checkpoint of step " + std::to_string(*restarts[0].step)),
            std::string::npos);
  EXPECT_NE(restarts[0].message.find(" s after the failure"), std::string::npos) << restarts[0].message;
  // The lost steps, the restart and the second start-up are not steps that count.
  const std::optional<double> goodput = store::goodput(run, 0);
  ASSERT_TRUE(goodput.has_value());
  EXPECT_GT(*goodput, 0.05);
  EXPECT_LT(*goodput, 0.95);
}

TEST(Restart, ARankZeroKilledBeforeItCouldRecordTheFailureIsRecordedByTheLauncher) {
  const std::string dir = fresh_dir("restart_rank_zero");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", log = dir + "/k.log";
  // The rank that records the run, gone without a word.
  const int launcher = start_and_kill(store, "k", "--max-restarts 0" + args(prefix), log, 3, 0);
  ASSERT_GT(launcher, 0);
  EXPECT_NE(wait_exit(launcher), 0);
  const std::string out = read_text(log);
  EXPECT_NE(out.find("kiln: the run failed (rank 0 on node "), std::string::npos) << out;
  EXPECT_NE(out.find("; not restarting it (--max-restarts 0)\n"), std::string::npos) << out;
  auto db = store::open_store(store, store::Access::ReadOnly);
  const store::RunRecord run = store::get_run(*db, store::resolve_run(*db, "k"));
  EXPECT_EQ(run.status, store::RunStatus::Failed) << out;
  EXPECT_EQ(run.error.rfind("rank 0 on node ", 0), 0u) << run.error;
  EXPECT_NE(run.error.find(" exited on signal 9 (Killed)"), std::string::npos) << run.error;
}

TEST(Restart, ARunThatFailsBeforeItsFirstStepIsNotStartedAgain) {
  const std::string dir = fresh_dir("restart_early");
  const std::string prefix = prepare_corpus(dir);
  const CommandResult r = run_command(kiln + " train --max-restarts 3 --no-store --name early" + args(prefix) +
                                      " --set 'data.paths=[\"" + dir + "/missing\"]'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("kiln: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not restarting it, since it failed before its first step and would fail the same way\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("restart 1"), std::string::npos) << r.output;
}

TEST(Restart, RefusesWhatItCannotSupervise) {
  const std::string dir = fresh_dir("restart_refusals");
  const std::string hostfile = dir + "/hosts";
  write_text(hostfile, "a slots=2\nb slots=2\n");
  CommandResult r = run_command(kiln + " train --ranks 3 --hostfile " + hostfile + " --max-restarts 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output, "kiln: error: 3 ranks do not spread evenly over 2 hosts; give a multiple of 2\n");
  r = run_command(kiln + " train --ranks 6 --hostfile " + hostfile);
  EXPECT_EQ(r.output, "kiln: error: 6 ranks over 2 hosts put 3 on each, and a has slots=2\n");
  write_text(hostfile, "a\na\n");
  r = run_command(kiln + " train --ranks 2 --hostfile " + hostfile);
  EXPECT_EQ(r.output, "kiln: error: --hostfile " + hostfile + ", line 2: a is named twice; give each host once, with its slots\n");
  r = run_command(kiln + " train --max-restarts 1 --exclude-failed");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(is_one_line(r.output)) << r.output;
  EXPECT_NE(r.output.find("--exclude-failed requires --hostfile"), std::string::npos) << r.output;
  r = run_command(kiln + " train --max-restarts -1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(is_one_line(r.output)) << r.output;
}

}  // namespace
}  // namespace kiln::test
