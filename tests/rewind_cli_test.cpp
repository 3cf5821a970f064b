// End-to-end: a loss spike whose action is `rewind` takes a real kiln run back to the newest
// checkpoint before it, past the next alerts.rewind_skip batches of its data, in the same
// process and the same run (docs/resilience.md#rewinding-past-a-loss-spike). Without skipping,
// the rewound run ends with the very weights of a run that never spiked (the restore is exact);
// with skipping, it reads on past the skipped batches; on two ranks (data-parallel, or a
// tensor-parallel pair) both go back together; and
// a run with no checkpoint before the spike, or with its rewinds spent, trains on.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "store/alert_rows.h"
#include "store/metric_queries.h"
#include "store/rewind_rows.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "trainer/checkpoint/checkpoint.h"

namespace kiln::test {
namespace {

// The small run, logging every step without validation or samples, its spike rules judging
// from the fifth logged step on (throughput off: alerts_cli_test.cpp says why), a checkpoint
// every 5 steps, rewinding past a loss spike.
std::string rewinding_run(const std::string& prefix, const std::string& dir, int skip) {
  return small_run(prefix) + " --set train.steps=20 --set train.log_interval=1 --set train.eval_interval=0"
         " --set train.sample_tokens=0 --set alerts.min_samples=5 --set alerts.window=20"
         " --set alerts.throughput_fraction=0 --set train.checkpoint_interval=5 --set train.checkpoint_dir=" +
         dir + "/checkpoints --set alerts.actions=loss_spike=rewind --set alerts.rewind_skip=" + std::to_string(skip);
}

struct Recorded {
  store::RunRecord run;
  std::vector<store::Rewind> rewinds;
  std::vector<store::Alert> alerts;
  std::vector<store::Event> rewind_events;
  std::map<int64_t, double> losses;  // rank 0's, by step
};

Recorded recorded(const std::string& store_path, const std::string& name) {
  auto db = store::open_store(store_path, store::Access::ReadOnly);
  Recorded r;
  const int64_t id = store::resolve_run(*db, name);
  r.run = store::get_run(*db, id);
  r.rewinds = store::list_rewinds(*db, id);
  r.alerts = store::list_alerts(*db, id);
  for (store::Event& e : store::list_events(*db, id))
    if (e.kind == store::event_kind::kRewind) r.rewind_events.push_back(std::move(e));
  store::for_each_metric(*db, id, [&](const store::MetricRow& row) {
    if (row.rank == 0) r.losses[row.step] = row.loss;
  });
  return r;
}

class Rewind : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(std::string("rewind_") + testing::UnitTest::GetInstance()->current_test_info()->name());
    prefix_ = prepare_corpus(dir_);
    store_ = dir_ + "/runs.db";
  }
  CommandResult train(const std::string& name, const std::string& faults, const std::string& settings,
                      int ranks = 1) {
    return run_command((faults.empty() ? "" : "KILN_FAULTS='" + faults + "' ") +
                       (ranks > 1 ? mpirun_command(ranks) : "") + kiln + " train --store " + store_ + " --name " +
                       name + settings);
  }
  std::string checkpoint(const std::string& run, int64_t step) const {
    return dir_ + "/checkpoints/" + run + fmt::format("/step-{:08d}", step);
  }
  std::string dir_, prefix_, store_;
};

TEST_F(Rewind, WithoutSkippingTheRewoundRunEndsWithTheWeightsOfOneThatNeverSpiked) {
  const CommandResult plain = train("plain", "", rewinding_run(prefix_, dir_, 0));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(plain.output.find("kiln: alert"), std::string::npos) << plain.output;
  // The spike is planted in what step 12 reports the first time it trains: the training itself
  // is the plain run's, so going back to step 10 and on again must land on its very bytes.
  const CommandResult spiked = train("spiked", "spike@12x50", rewinding_run(prefix_, dir_, 0));
  ASSERT_EQ(spiked.exit_code, 0) << spiked.output;
  EXPECT_NE(spiked.output.find("(rewind at the next step boundary)\n"), std::string::npos) << spiked.output;
  EXPECT_NE(spiked.output.find("kiln: alert action: rewind to step 10 (checkpoint " + checkpoint("spiked", 10) +
                               "), skipping no data; rewind 1 of 3\n"),
            std::string::npos)
      << spiked.output;
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(read_text(checkpoint("plain", 20) + "/" + file), read_text(checkpoint("spiked", 20) + "/" + file))
        << file;
  EXPECT_EQ(checkpoint_state(checkpoint("spiked", 20)).consumed_samples, 20 * 4);

  const Recorded a = recorded(store_, "plain"), b = recorded(store_, "spiked");
  EXPECT_EQ(b.run.status, store::RunStatus::Completed);
  EXPECT_EQ(b.losses, a.losses) << "every step trained again as the plain run trained it";
  ASSERT_EQ(b.rewinds.size(), 1u);
  const store::Rewind& r = b.rewinds[0];
  EXPECT_EQ(r.spike_step, 12);
  EXPECT_EQ(r.from_step, 13);  // the alert fired at step 12's logging; its action came after step 13
  EXPECT_EQ(r.to_step, 10);
  EXPECT_EQ(r.skipped_batches, 0);
  ASSERT_EQ(r.losses.size(), 3u);
  EXPECT_EQ(r.losses[0].loss, a.losses.at(11));
  EXPECT_DOUBLE_EQ(r.losses[1].loss, 50 * a.losses.at(12));
  EXPECT_EQ(r.losses[2].loss, a.losses.at(13));
  ASSERT_EQ(b.alerts.size(), 1u);
  EXPECT_EQ(b.alerts[0].action, "rewind");
}

TEST_F(Rewind, ASpikeGoesBackToTheCheckpointBeforeItAndReadsOnPastTheSkippedBatches) {
  const std::string run = rewinding_run(prefix_, dir_, 3) + " --set alerts.max_rewinds=2";
  const CommandResult plain = train("plain", "", run);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const CommandResult spiked = train("spiked", "spike@12x50", run);
  ASSERT_EQ(spiked.exit_code, 0) << spiked.output;
  EXPECT_NE(spiked.output.find("kiln: alert action: rewind to step 10 (checkpoint " + checkpoint("spiked", 10) +
                               "), skipping batches 11-13 of the data; rewind 1 of 2\n"),
            std::string::npos)
      << spiked.output;
  EXPECT_NE(spiked.output.find("kiln: trained 23 steps"), std::string::npos) << spiked.output;
  // Steps 11..20 read batches 14..23: the data position is three batches of 4 further on.
  EXPECT_EQ(checkpoint_state(checkpoint("spiked", 20)).consumed_samples, (20 + 3) * 4);
  EXPECT_EQ(checkpoint_state(checkpoint("spiked", 15)).consumed_samples, (15 + 3) * 4);

  const Recorded a = recorded(store_, "plain"), b = recorded(store_, "spiked");
  EXPECT_EQ(b.run.status, store::RunStatus::Completed);
  EXPECT_EQ(b.run.last_step, 20);
  ASSERT_EQ(b.losses.size(), 20u);
  EXPECT_EQ(b.losses.at(10), a.losses.at(10));
  EXPECT_NE(b.losses.at(11), a.losses.at(11)) << "step 11 trained on batch 14, not 11";
  ASSERT_EQ(b.rewinds.size(), 1u);
  const store::Rewind& r = b.rewinds[0];
  EXPECT_EQ(r.number, 1);
  EXPECT_EQ(r.to_step, 10);
  EXPECT_EQ(r.checkpoint, checkpoint("spiked", 10));
  EXPECT_EQ(r.first_skipped_batch, 11);
  EXPECT_EQ(r.skipped_batches, 3);
  ASSERT_EQ(r.losses.size(), 3u);
  EXPECT_EQ(r.losses[0].step, 11);
  EXPECT_EQ(r.losses[0].loss, a.losses.at(11)) << "the abandoned step 11 read batch 11 like the plain run";
  EXPECT_DOUBLE_EQ(r.losses[1].loss, 50 * a.losses.at(12));
  ASSERT_EQ(b.rewind_events.size(), 1u);
  EXPECT_EQ(b.rewind_events[0].step, 10);
  EXPECT_EQ(b.rewind_events[0].message,
            "from step 13 back to step 10 past the loss spike at step 12, skipping batches 11-13 of the data; "
            "rewind 1 of 2");

  const CommandResult shown = run_command(kiln + " runs show spiked --store " + store_);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("\nrewinds:\n"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find(" 11-13 "), std::string::npos) << shown.output;
}

TEST_F(Rewind, TwoRanksGoBackTogether) {
#ifndef KILN_HAVE_MPI
  GTEST_SKIP() << "skipped: built without MPI";
#endif
  const std::string run = rewinding_run(prefix_, dir_, 3);
  const CommandResult one = train("one", "spike@12x50", run);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Recorded a = recorded(store_, "one");
  // Two data-parallel replicas, a model split over a tensor pair (each rank restoring its
  // half of every split tensor), and two ranks sharding the weights (each keeping its shards of
  // what it restored whole) train the one-rank curve, rewind and all.
  for (const auto& [name, layout] : {std::pair<std::string, std::string>{"dp2", ""},
                                     {"tp2", " --set parallel.tp=2"},
                                     {"dp2_shard_parameters", " --set parallel.shard=parameters"}}) {
    const CommandResult two = train(name, "spike@12x50", run + layout, 2);
    ASSERT_EQ(two.exit_code, 0) << two.output;
    const std::string line = "kiln: alert action: rewind to step 10 (checkpoint " + checkpoint(name, 10) +
                             "), skipping batches 11-13 of the data; rewind 1 of 3\n";
    const size_t said = two.output.find(line);
    EXPECT_NE(said, std::string::npos) << two.output;
    EXPECT_EQ(two.output.find(line, said + 1), std::string::npos) << "said once, by rank 0";
    EXPECT_EQ(checkpoint_state(checkpoint(name, 20)).consumed_samples, (20 + 3) * 4);
    const Recorded b = recorded(store_, name);
    EXPECT_EQ(b.run.status, store::RunStatus::Completed);
    ASSERT_EQ(b.losses.size(), a.losses.size());
    for (const auto& [step, loss] : a.losses)
      EXPECT_NEAR(b.losses.at(step), loss, 1e-4 * loss + 5e-5) << name << ", step " << step;
    ASSERT_EQ(b.rewinds.size(), 1u);
    EXPECT_EQ(b.rewinds[0].to_step, 10);
    EXPECT_EQ(b.rewinds[0].losses.size(), 3u);
  }
}

TEST_F(Rewind, WithoutACheckpointBeforeTheSpikeOrWithItsRewindsSpentTheRunTrainsOn) {
  const CommandResult bare =
      train("bare", "spike@12x50", rewinding_run(prefix_, dir_, 3) + " --set train.checkpoint_interval=0");
  ASSERT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_NE(bare.output.find("kiln: alert action: no rewind: the run has no checkpoint before the loss spike at step "
                             "12 (train.checkpoint_interval writes them); it trains on\n"),
            std::string::npos)
      << bare.output;
  const Recorded b = recorded(store_, "bare");
  EXPECT_EQ(b.run.status, store::RunStatus::Completed);
  EXPECT_TRUE(b.rewinds.empty());
  ASSERT_EQ(b.alerts.size(), 1u);
  EXPECT_EQ(b.alerts[0].action, "rewind");

  // One rewind allowed: the spike at 12 takes the run back to step 10, the one at 17 only alerts.
  const CommandResult spent = train("spent", "spike@12x50,spike@17x50",
                                    rewinding_run(prefix_, dir_, 3) + " --set alerts.max_rewinds=1");
  ASSERT_EQ(spent.exit_code, 0) << spent.output;
  EXPECT_NE(spent.output.find("), skipping batches 11-13 of the data; rewind 1 of 1\n"), std::string::npos)
      << spent.output;
  EXPECT_NE(spent.output.find("kiln: alert action: no rewind: rewind limit reached (1 of alerts.max_rewinds=1 "
                              "done); the run trains on past the loss spike at step 17\n"),
            std::string::npos)
      << spent.output;
  const Recorded s = recorded(store_, "spent");
  EXPECT_EQ(s.run.status, store::RunStatus::Completed);
  EXPECT_EQ(s.run.last_step, 20);
  ASSERT_EQ(s.rewinds.size(), 1u);
  ASSERT_EQ(s.alerts.size(), 2u);
  EXPECT_EQ(s.alerts[1].step, 17);
  EXPECT_EQ(checkpoint_state(checkpoint("spent", 20)).consumed_samples, (20 + 3) * 4);
}

}  // namespace
}  // namespace kiln::test
