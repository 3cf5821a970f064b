// End-to-end, through the real binary: trainings from one checkpoint keep their work apart
// (docs/checkpoints.md#resuming). A checkpoint of a run that has ended, trained again from
// another command line, is a new run whose parent is that run, never steps appended to its
// record; the run itself goes on only when named (kiln runs resume) or resumed from its newest
// checkpoint with nothing changed.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/lineage.h"
#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

class FineTuneRunsCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    prefix_ = prepare_corpus(dir_);
    store_ = dir_ + "/runs.db";
  }

  // A run of `steps` steps logging each one, keeping a checkpoint every 4.
  std::string train(const std::string& more) {
    return kiln + " train --store " + store_ + small_run(prefix_) + " --set train.log_interval=1" +
           " --set train.eval_interval=0 --set train.sample_tokens=0 --set train.checkpoint_interval=4" +
           " --set train.checkpoint_dir=" + dir_ + "/checkpoints" + more;
  }

  store::RunRecord record_of(const std::string& run) {
    auto db = store::open_store(store_, store::Access::ReadOnly);
    return store::get_run(*db, store::resolve_run(*db, run));
  }

  std::vector<int64_t> steps_of(const std::string& run) {
    auto db = store::open_store(store_, store::Access::ReadOnly);
    std::vector<int64_t> steps;
    store::for_each_metric(*db, store::resolve_run(*db, run), [&](const store::MetricRow& r) { steps.push_back(r.step); });
    return steps;
  }

  std::string dir_, prefix_, store_;
};

TEST_F(FineTuneRunsCli, TwoTrainingsFromAnEndedRunsCheckpointAreTwoNewRuns) {
  ASSERT_EQ(run_command(train(" --name base --set train.steps=8")).exit_code, 0);
  const std::vector<int64_t> base_steps = steps_of("base");
  ASSERT_EQ(base_steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));

  // Two fine-tunes from the same checkpoint, each with its own settings.
  const std::string from = " --resume " + dir_ + "/checkpoints/base/step-00000004";
  const CommandResult first = run_command(train(from + " --set train.steps=10 --set train.lr=0.0005"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("kiln: run 'base' (id 1) has ended (completed) and its newest checkpoint is at step 8, "
                              "not this one at step 4, so this training is a new run 'base-2' (its parent: 'base' at "
                              "step 4); kiln runs resume base continues that run itself\n"),
            std::string::npos)
      << first.output;
  const CommandResult second = run_command(train(from + " --set train.steps=10 --set train.lr=0.002"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("so this training is a new run 'base-3'"), std::string::npos) << second.output;

  // Each record holds its own training alone; the base run is as it was.
  EXPECT_EQ(steps_of("base"), base_steps);
  EXPECT_EQ(record_of("base").status, store::RunStatus::Completed);
  for (const std::string run : {"base-2", "base-3"}) {
    EXPECT_EQ(steps_of(run), (std::vector<int64_t>{5, 6, 7, 8, 9, 10})) << run;
    auto db = store::open_store(store_, store::Access::ReadOnly);
    const store::Lineage lineage = store::run_lineage(*db, store::resolve_run(*db, run));
    ASSERT_EQ(lineage.ancestors.size(), 1u) << run;
    EXPECT_EQ(lineage.ancestors.front().name, "base");
    EXPECT_EQ(lineage.ancestors.front().step, 4);
  }
  // Their checkpoints are their own.
  EXPECT_TRUE(std::ifstream(dir_ + "/checkpoints/base-2/step-00000008/manifest.json").good());
  EXPECT_FALSE(std::ifstream(dir_ + "/checkpoints/base/step-00000010/manifest.json").good());

  // The newest checkpoint with a change is another training too.
  const CommandResult longer = run_command(train(" --resume " + dir_ + "/checkpoints/base --set train.steps=12"));
  ASSERT_EQ(longer.exit_code, 0) << longer.output;
  EXPECT_NE(longer.output.find("kiln: run 'base' (id 1) has ended (completed) and this training changes its config, so "
                               "this training is a new run 'base-4'"),
            std::string::npos)
      << longer.output;
  EXPECT_EQ(steps_of("base"), base_steps);

  // Named, the run itself goes on, whatever its --set change: kiln runs resume.
  const CommandResult resumed = run_command(kiln + " runs resume base --set train.steps=12 --store " + store_);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("a new run"), std::string::npos) << resumed.output;
  EXPECT_EQ(steps_of("base"), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
}

TEST_F(FineTuneRunsCli, FineTunesOfAnImportKeepTheirWorkEachInItsOwnRun) {
  // An imported model: a small run exported to Hugging Face's layout and imported back.
  ASSERT_EQ(run_command(kiln + " train --no-store --name base" + small_run(prefix_) + " --set train.checkpoint_dir=" +
                        dir_ + "/pretrained")
                .exit_code,
            0);
  ASSERT_EQ(run_command(kiln + " export --checkpoint " + dir_ + "/pretrained/base --format hf --output " + dir_ + "/hf")
                .exit_code,
            0);
  const CommandResult imported = run_command(kiln + " import --format hf --input " + dir_ + "/hf --output " + dir_ + "/tuned");
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  nlohmann::json state;
  std::ifstream(dir_ + "/tuned/step-00000000/state.json") >> state;
  const nlohmann::json& carried = state["config"];
  EXPECT_EQ(carried["train"]["checkpoint_interval"], 100);
  EXPECT_EQ(carried["train"]["warmup"], 10);
  EXPECT_EQ(carried["train"]["lr"], 5e-5);
  EXPECT_EQ(carried["data"]["split"], "95,5,0");

  // A fine-tune as a user types it: data, steps, and no checkpoint setting.
  const auto fine_tune = [&](const std::string& more) {
    return run_command(kiln + " train --resume " + dir_ + "/tuned --store " + store_ + " --set 'data.paths=[\"" + prefix_ +
                       "\"]' --set train.steps=12 --set backend.threads=1 --set train.checkpoint_dir=" + dir_ +
                       "/checkpoints" + more);
  };
  const CommandResult first = fine_tune("");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("kiln: saved checkpoint " + dir_ + "/checkpoints/tuned/step-00000012 "), std::string::npos)
      << first.output;
  EXPECT_TRUE(std::ifstream(dir_ + "/checkpoints/tuned/step-00000012/manifest.json").good());
  EXPECT_EQ(first.output.find("changed schedule"), std::string::npos) << first.output;

  const CommandResult second = fine_tune(" --set train.lr=1e-4");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("so this training is a new run 'tuned-2' (its parent: 'tuned' at step 0)"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(second.output.find("changed schedule"), std::string::npos) << second.output;
  EXPECT_EQ(steps_of("tuned").size(), steps_of("tuned-2").size());
  EXPECT_EQ(steps_of("tuned").back(), 12);

  // Compared, the two differ by what their command lines changed and nothing else.
  const CommandResult compared = run_command(kiln + " runs compare tuned tuned-2 --store " + store_);
  ASSERT_EQ(compared.exit_code, 0) << compared.output;
  const std::string differences = compared.output.substr(0, compared.output.find("\n\n"));
  EXPECT_EQ(differences, "config differences:\n  KEY       tuned  tuned-2\n  train.lr  5e-05  0.0001") << compared.output;
}

}  // namespace
}  // namespace kiln::test
