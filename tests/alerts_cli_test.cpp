// End-to-end: each alert rule fires on a real kiln run made to trip it (KILN_FAULTS plants
// the fault, or a threshold is set where the run is), and none on a healthy run; each alert
// is a printed line, a row in the store's alerts table with its `alert` event, the user's
// hook with the alert as JSON on stdin, and the rule's action.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/alert_rows.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "trainer/parallel/gpu_placement.h"

namespace kiln::test {
namespace {

// The small run, logging every step with no validation or sample, its spike rules judging
// from the fifth logged step on. Its throughput rule is off unless a test turns it on: a step
// of half a millisecond on a test machine shared with builds and other tests can take four
// times as long now and then with no fault of its own.
std::string alert_run(const std::string& prefix, int steps) {
  return small_run(prefix) + " --set train.steps=" + std::to_string(steps) +
         " --set train.log_interval=1 --set train.eval_interval=0 --set train.sample_tokens=0"
         " --set alerts.min_samples=5 --set alerts.window=20 --set alerts.throughput_fraction=0";
}

struct Recorded {
  store::RunRecord run;
  std::vector<store::Alert> alerts;
  std::vector<store::Event> alert_events;
};

Recorded recorded(const std::string& store_path, const std::string& name) {
  auto db = store::open_store(store_path, store::Access::ReadOnly);
  Recorded r;
  const int64_t id = store::resolve_run(*db, name);
  r.run = store::get_run(*db, id);
  r.alerts = store::list_alerts(*db, id);
  for (store::Event& e : store::list_events(*db, id))
    if (e.kind == store::event_kind::kAlert) r.alert_events.push_back(std::move(e));
  return r;
}

class Alerts : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    prefix_ = prepare_corpus(dir_);
    store_ = dir_ + "/runs.db";
  }
  CommandResult train(const std::string& name, const std::string& faults, const std::string& settings) {
    return run_command((faults.empty() ? "" : "KILN_FAULTS='" + faults + "' ") + kiln + " train --store " + store_ +
                       " --name " + name + settings);
  }
  std::string dir_, prefix_, store_;
};

TEST_F(Alerts, AHealthyRunFiresNone) {
  // Throughput stays off (alert_run says why); AlertRules.AHealthyNoisyRunFiresNothing holds
  // it to a noisy healthy run.
  const CommandResult r = train("healthy", "", alert_run(prefix_, 40));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("kiln: alert"), std::string::npos) << r.output;
  const Recorded rec = recorded(store_, "healthy");
  EXPECT_EQ(rec.run.status, store::RunStatus::Completed);
  EXPECT_TRUE(rec.alerts.empty());
  EXPECT_TRUE(rec.alert_events.empty());
}

TEST_F(Alerts, APlantedNanFiresAndTheHookGetsItAsJson) {
  const std::string hook_file = dir_ + "/alert.json";
  const CommandResult r =
      train("nan", "nan@3", alert_run(prefix_, 6) + " --set 'alerts.command=cat > " + hook_file + "'");
  ASSERT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: KILN_FAULTS plants a NaN loss at step 3\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kiln: alert: nan: loss is nan at step 3\n"), std::string::npos) << r.output;
  const Recorded rec = recorded(store_, "nan");
  EXPECT_EQ(rec.run.status, store::RunStatus::Failed);
  ASSERT_EQ(rec.alerts.size(), 1u);
  EXPECT_EQ(rec.alerts[0].rule, "nan");
  EXPECT_EQ(rec.alerts[0].step, 3);
  EXPECT_EQ(rec.alerts[0].action, "");
  ASSERT_EQ(rec.alert_events.size(), 1u);
  EXPECT_EQ(rec.alert_events[0].message, "nan: loss is nan at step 3");
  // The run waited for its hook before it ended.
  const nlohmann::json hook = nlohmann::json::parse(read_text(hook_file));
  EXPECT_EQ(hook["run"], "nan");
  EXPECT_EQ(hook["run_id"], rec.run.id);
  EXPECT_EQ(hook["store"], store_);
  EXPECT_EQ(hook["rule"], "nan");
  EXPECT_EQ(hook["step"], 3);
  EXPECT_TRUE(hook["value"].is_null());  // NaN is no JSON number
  EXPECT_TRUE(hook["rank"].is_null());
  EXPECT_EQ(hook["message"], "loss is nan at step 3");
  EXPECT_EQ(hook["action"], "");
  EXPECT_GT(hook["time"].get<double>(), 1.7e9);
}

TEST_F(Alerts, ALossSpikeStopsTheRunItsActionNames) {
  const CommandResult r =
      train("spike", "spike@12x50", alert_run(prefix_, 30) + " --set alerts.actions=loss_spike=stop");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: alert: loss_spike: loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" at step 12 is "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(stop at the next step boundary)\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kiln: alert action: the run stops at this step boundary (loss_spike)\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("stopped by command after step 13"), std::string::npos) << r.output;
  const Recorded rec = recorded(store_, "spike");
  EXPECT_EQ(rec.run.status, store::RunStatus::Stopped);
  EXPECT_EQ(rec.run.last_step, 13);
  ASSERT_EQ(rec.alerts.size(), 1u) << r.output;
  EXPECT_EQ(rec.alerts[0].rule, "loss_spike");
  EXPECT_EQ(rec.alerts[0].step, 12);
  EXPECT_EQ(rec.alerts[0].action, "stop");
  EXPECT_GT(rec.alerts[0].value, rec.alerts[0].threshold);
  EXPECT_EQ(rec.alert_events.size(), 1u);
}

TEST_F(Alerts, ThroughputFallingBelowHalfItsMedian) {
  // Slowed from step 10 on; three slow logged steps in a row fire it, so a lone hiccup of a
  // busy test machine before then does not.
  const CommandResult r =
      train("slowed", "throughput@10:300", alert_run(prefix_, 14) +
                                               " --set alerts.throughput_fraction=0.5 --set alerts.throughput_steps=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Recorded rec = recorded(store_, "slowed");
  ASSERT_EQ(rec.alerts.size(), 1u) << r.output;
  EXPECT_EQ(rec.alerts[0].rule, "throughput");
  EXPECT_EQ(rec.alerts[0].step, 12);
  EXPECT_LT(rec.alerts[0].value, rec.alerts[0].threshold);
  EXPECT_NE(r.output.find("kiln: alert: throughput: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("for 3 logged steps in a row"), std::string::npos) << r.output;
}

TEST_F(Alerts, AStalledStepWhileItIsStuck) {
  const CommandResult r = train("stalled", "stall@3:2", alert_run(prefix_, 5) + " --set alerts.stall_s=0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: alert: stall: step 3 has run 0."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" s without finishing (alerts.stall_s=0.5)\n"), std::string::npos) << r.output;
  // Fired during step 3: before its progress line.
  EXPECT_LT(r.output.find("kiln: alert: stall"), r.output.find("step 3/5")) << r.output;
  const Recorded rec = recorded(store_, "stalled");
  ASSERT_EQ(rec.alerts.size(), 1u);
  EXPECT_EQ(rec.alerts[0].rule, "stall");
  EXPECT_EQ(rec.alerts[0].step, 3);
}

TEST_F(Alerts, MemoryNearTheLimitTakesACheckpoint) {
  const CommandResult r = train("memory", "", alert_run(prefix_, 3) +
                                                  " --set alerts.memory_fraction=0.000001"
                                                  " --set alerts.actions=memory=checkpoint"
                                                  " --set train.checkpoint_dir=" + dir_ + "/checkpoints");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Recorded rec = recorded(store_, "memory");
  EXPECT_EQ(rec.run.status, store::RunStatus::Completed);
  ASSERT_EQ(rec.alerts.size(), 1u) << r.output;  // once: it never recovers
  EXPECT_EQ(rec.alerts[0].rule, "memory");
  EXPECT_EQ(rec.alerts[0].rank, 0);
  EXPECT_EQ(rec.alerts[0].step, 1);
  EXPECT_EQ(rec.alerts[0].action, "checkpoint");
  // Fired at step 1's logging, taken at step 2's boundary.
  EXPECT_NE(r.output.find("kiln: alert action: the run checkpoints at this step boundary (memory)\n"
                          "kiln: saved checkpoint " + dir_ + "/checkpoints/memory/step-00000002"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("kiln: alert: memory: rank 0 on " + host_name() + " has held "), std::string::npos)
      << r.output;
}

TEST_F(Alerts, ASlowedRankUnderMpirunIsAStraggler) {
#ifndef KILN_HAVE_MPI
  GTEST_SKIP() << "skipped: built without MPI";
#endif
  const CommandResult r = run_command("KILN_FAULTS=slow@1:60 " + mpirun_command(2) + kiln + " train --store " +
                                      store_ + " --name straggler" + alert_run(prefix_, 8));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: KILN_FAULTS plants rank 1 working 60 ms longer every step\n"), std::string::npos)
      << r.output;
  const Recorded rec = recorded(store_, "straggler");
  ASSERT_EQ(rec.alerts.size(), 1u) << r.output;
  EXPECT_EQ(rec.alerts[0].rule, "straggler");
  EXPECT_EQ(rec.alerts[0].rank, 1);
  EXPECT_EQ(rec.alerts[0].step, 3);  // alerts.straggler_steps=3 logged steps in a row
  EXPECT_GT(rec.alerts[0].value, 60);
  EXPECT_NE(r.output.find("kiln: alert: straggler: rank 1 on " + host_name() + " worked "), std::string::npos)
      << r.output;
}

TEST_F(Alerts, BadFaultsAreOneLine) {
  const CommandResult r = train("bad", "slow@one:40", alert_run(prefix_, 3));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("KILN_FAULTS: cannot read \"slow@one:40\"; write slow@RANK:MS, e.g. slow@1:40"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kiln::test
