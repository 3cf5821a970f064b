// The spread's 64-step blocks as the writer keeps them: appended, recomputed when a step
// changes, trimmed by a rewind and removed with their run.
#include "store/spread_blocks.h"

#include <gtest/gtest.h>

#include <limits>

#include "store/batch_rows.h"
#include "store/metric_blocks.h"
#include "store/rewind_rows.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

// A step's rows of ranks first_rank on, the r-th one's fwd_ms the r-th value (NaN: not
// measured), logged at 1e9 + step.
std::vector<MetricRow> step_rows(int64_t step, const std::vector<double>& fwd_ms, int first_rank = 0) {
  std::vector<MetricRow> rows;
  for (size_t r = 0; r < fwd_ms.size(); ++r) {
    MetricRow row;
    row.step = step;
    row.rank = first_rank + static_cast<int>(r);
    row.time = 1e9 + static_cast<double>(step);
    row.fwd_ms = fwd_ms[r];
    rows.push_back(row);
  }
  return rows;
}

class SpreadBlocksTest : public testing_util::StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    db_ = open_store(path(), Access::ReadWrite);
    db_->exec("INSERT INTO runs (id, name, created_at) VALUES (1, 'wide', 0)");
  }
  void commit(const std::vector<std::vector<MetricRow>>& steps) {
    Batch batch;
    for (const auto& rows : steps) batch.items.push_back(MetricBatch{rows, std::nullopt});
    Transaction tx(*db_);
    write_batch(*db_, 1, batch, {}, 1.7e9);
    tx.commit();
  }
  // The fwd_ms spread of each block of run 1, by block.
  std::vector<FieldBlock> blocks() {
    return read_field_blocks(*db_, 1, *find_metric_field("fwd_ms"), std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max());
  }
  std::unique_ptr<Database> db_;
};

TEST_F(SpreadBlocksTest, ABlockMergesItsWideStepsAndATieKeepsTheEarlierStepsRank) {
  // Step 3: min 2 at ranks 1 and 9 (the lower, 1), max 9 at ranks 2 and 3 (2).
  // Step 7: min 1 at rank 1, max 9 again at rank 0: the earlier step's rank 2 stays.
  commit({step_rows(3, {4, 2, 9, 9, 5, 6, 7, 8, 3, 2}), step_rows(7, {9, 1, 3, 3, 3, 3, 3, 3, 3, 9})});
  // Appended by a later commit: 11 ranks, rank 10 without a value; min 1 again at rank 0,
  // after step 7's rank 1. A narrow step (8 ranks) has no spread and ends no block.
  commit({step_rows(9, {1, 2, 2, 2, 2, 2, 2, 2, 2, 2, kNoValue}), step_rows(10, {0, 0, 0, 0, 0, 0, 0, 0})});
  commit({step_rows(64, {5, 5, 5, 5, 5, 5, 5, 5, 5})});
  const std::vector<FieldBlock> b = blocks();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].block, 0);
  EXPECT_EQ(b[0].part.step, 9);
  EXPECT_EQ(b[0].part.time, 1e9 + 9);
  EXPECT_EQ(b[0].part.ranks, 11);
  const FieldSpread& f = b[0].part.spread;
  EXPECT_EQ(f.min, 1.0);
  EXPECT_EQ(f.min_rank, 1);
  EXPECT_EQ(f.max, 9.0);
  EXPECT_EQ(f.max_rank, 2);
  EXPECT_EQ(f.sum, 55.0 + 40.0 + 19.0);
  EXPECT_EQ(f.count, 30);
  EXPECT_EQ(b[1].block, 1);
  EXPECT_EQ(b[1].part.step, 64);
  EXPECT_EQ(b[1].part.ranks, 9);
  EXPECT_EQ(b[1].part.spread.max_rank, 0);
  // A field no rank measured is absent from the block.
  const auto rate = read_field_blocks(*db_, 1, *find_metric_field("tokens_per_s"), 0, 1);
  ASSERT_EQ(rate.size(), 2u);
  EXPECT_FALSE(rate[0].part.spread.present());
}

TEST_F(SpreadBlocksTest, AChangedStepRecomputesItsBlock) {
  commit({step_rows(1, {1, 1, 1, 1, 1, 1, 1, 1, 1, 90}), step_rows(2, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2})});
  // A resumed run logs step 1 again without the spike: a max cannot give 90 back, the block
  // is read again from its steps.
  commit({step_rows(1, {1, 1, 1, 1, 1, 1, 1, 1, 1, 3})});
  ASSERT_EQ(blocks().size(), 1u);
  EXPECT_EQ(blocks()[0].part.spread.max, 3.0);
  EXPECT_EQ(blocks()[0].part.spread.max_rank, 9);
  EXPECT_EQ(blocks()[0].part.step, 2);  // still the block's last step
  // Ranks 10 and 11 in a later commit extend step 2's spread: it changed, its block too.
  commit({step_rows(2, {2, 7}, 10)});
  EXPECT_EQ(blocks()[0].part.spread.max, 7.0);
  EXPECT_EQ(blocks()[0].part.spread.max_rank, 11);
  EXPECT_EQ(blocks()[0].part.ranks, 12);
  EXPECT_EQ(blocks()[0].part.spread.count, 22);
  // A step before the block's last, new to the table, is not appended either.
  commit({step_rows(0, {0.5, 1, 1, 1, 1, 1, 1, 1, 1})});
  EXPECT_EQ(blocks()[0].part.spread.min, 0.5);
  EXPECT_EQ(blocks()[0].part.step, 2);
  EXPECT_EQ(blocks()[0].part.spread.count, 31);
}

TEST_F(SpreadBlocksTest, ARewindTrimsTheBlocksAndRemovingTheRunRemovesThem) {
  std::vector<std::vector<MetricRow>> steps;
  for (int64_t step = 0; step < 200; ++step)
    steps.push_back(step_rows(step, {1, 1, 1, 1, 1, 1, 1, 1, 1, step == 120 ? 99.0 : 2.0}));
  commit(steps);
  EXPECT_EQ(blocks().size(), 4u);
  Rewind back;
  back.number = 1;
  back.spike_step = 120;
  back.from_step = 199;
  back.to_step = 100;
  back.first_skipped_batch = 121;
  back.skipped_batches = 10;
  {
    Transaction tx(*db_);
    insert_rewind(*db_, 1, back);
    tx.commit();
  }
  // Block 1 (steps 64-127) kept steps 64-100, without the spike at 120.
  std::vector<FieldBlock> b = blocks();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[1].part.step, 100);
  EXPECT_EQ(b[1].part.spread.max, 2.0);
  EXPECT_EQ(b[1].part.spread.count, 37 * 10);
  // Training on from step 101 appends to it again.
  commit({step_rows(101, {1, 1, 1, 1, 1, 1, 1, 1, 1, 4})});
  b = blocks();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[1].part.step, 101);
  EXPECT_EQ(b[1].part.spread.max, 4.0);
  remove_run(*db_, 1, true);
  EXPECT_EQ(db_->query_int("SELECT count(*) FROM spread_blocks"), 0);
}

}  // namespace
}  // namespace kiln::store
