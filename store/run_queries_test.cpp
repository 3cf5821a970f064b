#include "store/run_queries.h"

#include <gtest/gtest.h>

#include <functional>

#include "base/check.h"
#include "store/commands.h"
#include "store/run_details.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;

using testing_util::interval;
using testing_util::run_info;
using testing_util::StoreTest;

std::vector<std::string> names(const std::vector<RunRecord>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.push_back(r.name);
  return out;
}

// Four runs: two completed (one tagged), one failed, one still running (its writer is kept
// open by the fixture so its heartbeat is fresh).
class RunQueriesTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    const std::vector<std::pair<std::string, RunStatus>> runs = {
        {"gpt2-small-a", RunStatus::Completed},
        {"gpt2-small-b", RunStatus::Completed},
        {"llama-1b", RunStatus::Failed},
    };
    for (const auto& [name, status] : runs) {
      RunWriter writer(path());
      RunInfo info = run_info(name);
      if (name == "gpt2-small-b") info.tags = {"baseline", "fp32"};
      const int64_t id = writer.create_run(info);
      ids_.push_back(id);
      for (int64_t step = 0; step < 3; ++step) writer.log_metrics(interval(step, 2));
      writer.finish(status, status == RunStatus::Failed ? "out of memory" : "");
      writer.flush();
    }
    live_ = std::make_unique<RunWriter>(path());
    ids_.push_back(live_->create_run(run_info("llama-8b")));
    live_->log_metrics(interval(0, 2));
    live_->flush();
    db_ = open_store(path(), Access::ReadWrite);
    // Distinct creation times, one day apart, oldest first.
    for (size_t i = 0; i < ids_.size(); ++i)
      db_->exec("UPDATE runs SET created_at = " + std::to_string(1.7e9 + 86400.0 * i) +
                " WHERE id = " + std::to_string(ids_[i]));
  }
  void TearDown() override {
    live_.reset();
    db_.reset();
    StoreTest::TearDown();
  }

  std::vector<int64_t> ids_;
  std::unique_ptr<RunWriter> live_;
  std::unique_ptr<Database> db_;
};

TEST_F(RunQueriesTest, ListsNewestFirstWithFilters) {
  EXPECT_EQ(names(list_runs(*db_)),
            (std::vector<std::string>{"llama-8b", "llama-1b", "gpt2-small-b", "gpt2-small-a"}));
  RunFilter completed;
  completed.status = RunStatus::Completed;
  EXPECT_EQ(names(list_runs(*db_, completed)),
            (std::vector<std::string>{"gpt2-small-b", "gpt2-small-a"}));
  RunFilter running;
  running.status = RunStatus::Running;
  EXPECT_EQ(names(list_runs(*db_, running)), (std::vector<std::string>{"llama-8b"}));
  RunFilter tagged;
  tagged.tag = "baseline";
  EXPECT_EQ(names(list_runs(*db_, tagged)), (std::vector<std::string>{"gpt2-small-b"}));
  tagged.tag = "base";  // tags match whole
  EXPECT_TRUE(list_runs(*db_, tagged).empty());
  RunFilter named;
  named.name_contains = "LLAMA";
  EXPECT_EQ(names(list_runs(*db_, named)), (std::vector<std::string>{"llama-8b", "llama-1b"}));
  RunFilter since;
  since.since = 1.7e9 + 86400.0;
  since.limit = 2;
  EXPECT_EQ(names(list_runs(*db_, since)), (std::vector<std::string>{"llama-8b", "llama-1b"}));

  const RunRecord failed = list_runs(*db_, named).at(1);
  EXPECT_EQ(failed.status, RunStatus::Failed);
  EXPECT_EQ(failed.error, "out of memory");
  EXPECT_EQ(failed.last_step, 2);
  const RunRecord baseline = get_run(*db_, ids_[1]);
  EXPECT_EQ(baseline.tags, (std::vector<std::string>{"baseline", "fp32"}));
}

TEST_F(RunQueriesTest, ARunningRunWithAStaleHeartbeatReadsAsLost) {
  live_.reset();  // the process is gone; its row still says running
  db_->exec("UPDATE runs SET heartbeat_at = " + std::to_string(unix_now() - 45) +
            " WHERE id = " + std::to_string(ids_[3]));
  const RunRecord lost = get_run(*db_, ids_[3]);
  EXPECT_EQ(lost.status, RunStatus::Lost);
  EXPECT_EQ(lost.stored_status, RunStatus::Running);
  EXPECT_EQ(get_run(*db_, ids_[3], 60).status, RunStatus::Running);  // a laxer threshold
  RunFilter filter;
  filter.status = RunStatus::Lost;
  EXPECT_EQ(names(list_runs(*db_, filter)), (std::vector<std::string>{"llama-8b"}));
  filter.status = RunStatus::Running;
  EXPECT_TRUE(list_runs(*db_, filter).empty());
  // Commands cannot reach it.
  EXPECT_EQ(error_of([&] { insert_command(*db_, ids_[3], CommandAction::Stop); }),
            "store: run 'llama-8b' is lost; commands only reach a running or paused run");
}

TEST_F(RunQueriesTest, FiltersByConfigValues) {
  // Configs as kiln train records them: nested sections, numbers, booleans and text.
  const std::vector<std::string> configs = {
      R"({"model":{"arch":"gpt2","n_layer":12},"train":{"lr":0.0003,"cuda_graphs":true}})",
      R"({"model":{"arch":"gpt2","n_layer":12},"train":{"lr":0.001,"cuda_graphs":false}})",
      R"({"model":{"arch":"llama","n_layer":16},"train":{"lr":0.0003}})",
      R"({})",
  };
  for (size_t i = 0; i < ids_.size(); ++i)
    db_->exec("UPDATE runs SET config_json = '" + configs[i] + "' WHERE id = " + std::to_string(ids_[i]));
  const auto where = [&](std::vector<std::string> matches) {
    RunFilter filter;
    for (const std::string& m : matches) filter.config.push_back(parse_config_match(m));
    return names(list_runs(*db_, filter));
  };
  EXPECT_EQ(where({"train.lr=3e-4"}), (std::vector<std::string>{"llama-1b", "gpt2-small-a"}));
  EXPECT_EQ(where({"model.n_layer=12.0"}), (std::vector<std::string>{"gpt2-small-b", "gpt2-small-a"}));
  EXPECT_EQ(where({"model.arch=llama"}), (std::vector<std::string>{"llama-1b"}));
  EXPECT_EQ(where({"train.cuda_graphs=false"}), (std::vector<std::string>{"gpt2-small-b"}));
  EXPECT_EQ(where({"train.lr=0.0003", "model.arch=gpt2"}), (std::vector<std::string>{"gpt2-small-a"}));
  EXPECT_TRUE(where({"train.steps=10"}).empty());  // no run sets it
  EXPECT_EQ(parse_config_match("data.paths=a=b").value, "a=b");
  for (const char* bad : {"train.lr", "=1", ".lr=1", "train..lr=1", "train.l r=1", "$.x=1"})
    EXPECT_EQ(error_of([&] { parse_config_match(bad); }),
              std::string("runs: '") + bad + "' is not KEY=VALUE with a dotted config key (e.g. train.lr=0.001)");
}

TEST_F(RunQueriesTest, ResolvesIdsNamesAndUniquePrefixes) {
  EXPECT_EQ(resolve_run(*db_, std::to_string(ids_[2])), ids_[2]);
  EXPECT_EQ(resolve_run(*db_, "llama-1b"), ids_[2]);
  EXPECT_EQ(resolve_run(*db_, "llama-8"), ids_[3]);
  EXPECT_EQ(error_of([&] { resolve_run(*db_, "gpt2-small"); }),
            "store: run 'gpt2-small' is ambiguous: gpt2-small-a (id " + std::to_string(ids_[0]) +
                "), gpt2-small-b (id " + std::to_string(ids_[1]) +
                "); give the full name or the id");
  EXPECT_EQ(error_of([&] { resolve_run(*db_, "small-c"); }),
            "store: no run named 'small-c' in " + path() + " (it holds 4 runs; `kiln runs list` "
            "shows them)");
  EXPECT_EQ(error_of([&] { resolve_run(*db_, "SMALL"); }),
            "store: no run named 'SMALL' in " + path() + "; did you mean gpt2-small-b (id " +
                std::to_string(ids_[1]) + "), gpt2-small-a (id " + std::to_string(ids_[0]) + ")?");
  EXPECT_EQ(error_of([&] { resolve_run(*db_, "999"); }),
            "store: no run with id 999 in " + path());
  EXPECT_EQ(error_of([&] { resolve_run(*db_, ""); }), "store: no run given (an id or a name)");
  auto empty = open_store(path("empty.db"), Access::ReadWrite);
  EXPECT_EQ(error_of([&] { resolve_run(*empty, "x"); }),
            "store: no run named 'x' in " + path("empty.db") + " (it holds no runs)");
}

TEST_F(RunQueriesTest, FindsARunByItsExactNameOnly) {
  EXPECT_EQ(find_run_named(*db_, "llama-1b"), ids_[2]);
  EXPECT_EQ(find_run_named(*db_, "llama-"), std::nullopt);
  EXPECT_EQ(find_run_named(*db_, std::to_string(ids_[2])), std::nullopt);
}

TEST_F(RunQueriesTest, DetailsHoldTheLatestRowsEventsAndCommands) {
  insert_command(*db_, ids_[3], CommandAction::Checkpoint);
  live_->log_metrics(interval(7, 2));
  live_->log_checkpoint({7, "/ck/7", std::nullopt, "tp1.pp1.dp1", 0, std::nullopt});
  live_->flush();
  const RunDetails d = run_details(*db_, ids_[3], 1);  // the newest event only
  EXPECT_EQ(d.run.name, "llama-8b");
  EXPECT_EQ(d.run.status, RunStatus::Running);
  ASSERT_EQ(d.latest.size(), 2u);
  EXPECT_EQ(d.latest[0].step, 7);
  EXPECT_EQ(d.latest[1].rank, 1);
  EXPECT_EQ(d.latest[1].loss, testing_util::loss_of(7, 1));
  EXPECT_FALSE(d.latest_valid.has_value());
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events.back().kind, "checkpoint");
  ASSERT_EQ(d.checkpoints.size(), 1u);
  EXPECT_EQ(d.checkpoints[0].path, "/ck/7");
  EXPECT_FALSE(d.checkpoints[0].bytes.has_value());
  ASSERT_EQ(d.commands.size(), 1u);
  EXPECT_EQ(d.commands[0].action, CommandAction::Checkpoint);
}

TEST_F(RunQueriesTest, TagsNotesAndRemoval) {
  add_tags(*db_, ids_[0], {"ablation", "baseline", "ablation"});
  add_tags(*db_, ids_[0], {"lr-sweep"});
  EXPECT_EQ(get_run(*db_, ids_[0]).tags,
            (std::vector<std::string>{"ablation", "baseline", "lr-sweep"}));
  remove_tags(*db_, ids_[0], {"baseline", "not-there"});
  EXPECT_EQ(get_run(*db_, ids_[0]).tags, (std::vector<std::string>{"ablation", "lr-sweep"}));
  EXPECT_EQ(error_of([&] { add_tags(*db_, ids_[0], {""}); }), "store: a tag cannot be empty");
  set_notes(*db_, ids_[0], "warmup too short; see run 7");
  EXPECT_EQ(get_run(*db_, ids_[0]).notes, "warmup too short; see run 7");
  EXPECT_EQ(error_of([&] { set_notes(*db_, 999, "x"); }),
            "store: no run with id 999 in " + path());

  EXPECT_EQ(error_of([&] { remove_run(*db_, ids_[3]); }),
            "store: run 'llama-8b' is running; stop it first, or remove it anyway with force");
  remove_run(*db_, ids_[0]);
  EXPECT_EQ(db_->query_int("SELECT count(*) FROM runs"), 3);
  EXPECT_EQ(db_->query_int("SELECT count(*) FROM metrics WHERE run_id = " + std::to_string(ids_[0])), 0);
  EXPECT_EQ(db_->query_int("SELECT count(*) FROM events WHERE run_id = " + std::to_string(ids_[0])), 0);
  EXPECT_EQ(db_->query_int("SELECT count(*) FROM metrics WHERE run_id = " + std::to_string(ids_[1])), 6);
  live_.reset();
  remove_run(*db_, ids_[3], true);
  EXPECT_EQ(db_->query_int("SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(db_->query_text("PRAGMA foreign_key_check"), "");
}

}  // namespace
}  // namespace kiln::store
