#include "store/rewind_rows.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/expert_queries.h"
#include "store/metric_blocks.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/sample_queries.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::interval;
using testing_util::loss_of;
using testing_util::run_info;
using testing_util::StoreTest;

class RewindRowsTest : public StoreTest {};

// Steps 1..130 of two ranks, rank 0's loss spiking to 50 at step 120, with a validation, a
// sample, an expert load and a checkpoint every 50 steps.
void train_to_130(RunWriter& writer) {
  for (int64_t step = 1; step <= 130; ++step) {
    std::vector<MetricRow> rows = interval(step, 2);
    if (step == 120) rows[0].loss = 50;
    writer.log_metrics(rows);
    if (step % 50 == 0) {
      writer.log_valid({step, 0, 2.0});
      writer.log_samples({Sample{step, 0, 0, "Once", " upon", 0.8}});
      writer.log_expert_loads({ExpertLoad{step, 1, {3, 5}, {}, 0.01, 0.6}});
      writer.log_checkpoint({step, "checkpoints/spiky/step-" + std::to_string(step), 1000, "tp1.pp1.dp1", 0, std::nullopt});
    }
  }
}

Rewind rewind_to_100() {
  Rewind r;
  r.number = 1;
  r.spike_step = 120;
  r.from_step = 130;
  r.to_step = 100;
  r.checkpoint = "checkpoints/spiky/step-100";
  r.first_skipped_batch = 101;
  r.skipped_batches = 200;
  r.message = "from step 130 back to step 100, skipping batches 101-300 of the data; rewind 1 of 3";
  return r;
}

TEST_F(RewindRowsTest, ARewindKeepsRankZerosAbandonedLossesAndForgetsTheirSteps) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("spiky"));
    train_to_130(writer);
    EXPECT_EQ(writer.rewind_count(), 0);
    writer.log_rewind(rewind_to_100());  // after the rows queued before it
    EXPECT_EQ(writer.rewind_count(), 1);
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  const std::vector<Rewind> rewinds = list_rewinds(*db, id);
  ASSERT_EQ(rewinds.size(), 1u);
  const Rewind& r = rewinds[0];
  EXPECT_EQ(r.number, 1);
  EXPECT_EQ(r.spike_step, 120);
  EXPECT_EQ(r.from_step, 130);
  EXPECT_EQ(r.to_step, 100);
  EXPECT_EQ(r.checkpoint, "checkpoints/spiky/step-100");
  EXPECT_EQ(r.first_skipped_batch, 101);
  EXPECT_EQ(r.skipped_batches, 200);
  EXPECT_GT(r.time, 1.7e9);
  ASSERT_EQ(r.losses.size(), 30u);  // steps 101..130, rank 0's
  EXPECT_EQ(r.losses.front().step, 101);
  EXPECT_DOUBLE_EQ(r.losses.front().loss, loss_of(101, 0));
  EXPECT_DOUBLE_EQ(r.losses.front().time, 1.7e9 + 101);
  EXPECT_EQ(r.losses[19].step, 120);
  EXPECT_DOUBLE_EQ(r.losses[19].loss, 50);
  EXPECT_EQ(r.losses.back().step, 130);

  // The run's tables hold steps up to 100 alone.
  EXPECT_EQ(get_run(*db, id).last_step, 100);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics"), 200);
  const std::vector<ValidRow> valid = list_valid(*db, id);
  ASSERT_EQ(valid.size(), 2u);
  EXPECT_EQ(valid.back().step, 100);
  EXPECT_EQ(list_samples(*db, id, 10).back().step, 100);
  EXPECT_EQ(last_expert_step(*db, id), 100);
  const std::vector<Checkpoint> checkpoints = list_checkpoints(*db, id);
  ASSERT_EQ(checkpoints.size(), 2u);
  EXPECT_EQ(checkpoints.back().step, 100);

  // Block 1 (steps 64..127) no longer remembers the spike; block 2 (128..) is gone.
  const size_t loss = key_index("loss");
  const std::vector<KeyBlock> block = read_key_blocks(*db, id, 0, loss, 1, 2);
  ASSERT_EQ(block.size(), 1u);
  EXPECT_EQ(block[0].block, 1);
  EXPECT_DOUBLE_EQ(block[0].aggregate.max, loss_of(64, 0));
  EXPECT_DOUBLE_EQ(block[0].aggregate.min, loss_of(100, 0));
  EXPECT_EQ(block[0].aggregate.last_step, 100);

  // One `rewind` event, at the step the run went back to, saying it all.
  int rewind_events = 0;
  for (const Event& e : list_events(*db, id)) {
    if (e.kind != event_kind::kRewind) continue;
    ++rewind_events;
    EXPECT_EQ(e.step, 100);
    EXPECT_EQ(e.message, rewind_to_100().message);
  }
  EXPECT_EQ(rewind_events, 1);
}

TEST_F(RewindRowsTest, TheStepsTrainedAgainFillTheBlocksAfresh) {
  RunWriter writer(path());
  const int64_t id = writer.create_run(run_info("again"));
  train_to_130(writer);
  writer.log_rewind(rewind_to_100());
  for (int64_t step = 101; step <= 110; ++step) {
    std::vector<MetricRow> rows = interval(step, 2);
    rows[0].loss = 1.5;
    writer.log_metrics(rows);
  }
  writer.flush();
  auto db = open_store(path(), Access::ReadOnly);
  const std::vector<KeyBlock> block = read_key_blocks(*db, id, 0, key_index("loss"), 1, 1);
  ASSERT_EQ(block.size(), 1u);
  EXPECT_DOUBLE_EQ(block[0].aggregate.min, loss_of(100, 0));
  EXPECT_DOUBLE_EQ(block[0].aggregate.max, 1.5);
  EXPECT_DOUBLE_EQ(block[0].aggregate.last, 1.5);
  EXPECT_EQ(block[0].aggregate.last_step, 110);
  EXPECT_EQ(get_run(*db, id).last_step, 110);
  // The abandoned losses stay as they were.
  EXPECT_DOUBLE_EQ(list_rewinds(*db, id)[0].losses.front().loss, loss_of(101, 0));
}

TEST_F(RewindRowsTest, RewindsGoWithTheirRun) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("gone"));
    train_to_130(writer);
    writer.log_rewind(rewind_to_100());
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadWrite);
  EXPECT_EQ(rewind_count(*db, id), 1);
  db->exec("DELETE FROM runs");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM rewinds"), 0);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM rewound_losses"), 0);
}

}  // namespace
}  // namespace kiln::store
