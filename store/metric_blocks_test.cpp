// The rollup must never change an answer: every series read from blocks is held to one
// computed here by brute force from the rows the test logged, and every stored block to one
// recomputed from the metrics table.
#include "store/metric_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <tuple>

#include "base/check.h"
#include "store/metric_queries.h"
#include "store/rows.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;

using testing_util::run_info;
using testing_util::StoreTest;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// The rows as the test logged them, the last write of a (rank, step) winning.
using Rows = std::map<std::pair<int, int64_t>, MetricRow>;

void log(RunWriter& writer, Rows& truth, std::vector<MetricRow> rows) {
  for (const auto& r : rows) truth[{r.rank, r.step}] = r;
  writer.log_metrics(std::move(rows));
}

double value_of(const MetricRow& r, const std::string& key) {
  if (key == "loss") return r.loss;
  if (key == "grad_norm") return r.grad_norm;
  if (key == "mem_used") return r.mem_used ? static_cast<double>(*r.mem_used) : kNoValue;
  if (key == "tokens") return static_cast<double>(r.tokens);
  if (key == "time") return r.time;
  ADD_FAILURE() << "no test accessor for " << key;
  return kNoValue;
}

// metric_series' contract, computed the slow way: the rows in range with a value, the step
// range they span, buckets of `width` steps from the first step, or, at 64 steps and wider
// (or past max_rows rows), whole 64-step blocks, as few per bucket as keep the count within
// max_points, or, at 64 blocks a bucket and more (or past max_rows blocks), whole 4,096-step
// superblocks likewise.
std::vector<RankSeries> brute_force(const Rows& rows, const SeriesQuery& q) {
  struct Row {
    int64_t step;
    double time, value;
  };
  std::map<int, std::vector<Row>> by_rank;
  int64_t first = kMax, last = kMin;
  for (const auto& [where, r] : rows) {
    const auto [rank, step] = where;
    const double value = value_of(r, q.key);
    if (std::isnan(value) || step < q.first_step || step > q.last_step) continue;
    if (!q.ranks.empty() && std::find(q.ranks.begin(), q.ranks.end(), rank) == q.ranks.end())
      continue;
    by_rank[rank].push_back({step, r.time, value});
    first = std::min(first, step);
    last = std::max(last, step);
  }
  if (by_rank.empty()) return {};
  const auto span = static_cast<uint64_t>(last - first);
  const uint64_t mp = q.max_points;
  const uint64_t width = mp == 0 || span < mp ? 1 : span / mp + 1;
  std::function<uint64_t(int64_t)> bucket_of = [&](int64_t step) {
    return static_cast<uint64_t>(step - first) / width;
  };
  const auto within_rows = [&](uint64_t reads) { return q.max_rows == 0 || reads * by_rank.size() <= q.max_rows; };
  // floor division by hand, apart from the store's block_of
  auto unit = [](int64_t steps) {
    return [steps](int64_t s) { return s >= 0 ? s / steps : -((-s + steps - 1) / steps); };
  };
  const auto block = unit(64), superblock = unit(4096);
  const auto blocks = static_cast<uint64_t>(block(last) - block(first) + 1);
  if (mp > 0 && (width >= 64 || !within_rows(span + 1))) {
    const uint64_t per_bucket = (blocks + mp - 1) / mp;
    bucket_of = [=](int64_t step) {
      return static_cast<uint64_t>(block(step) - block(first)) / per_bucket;
    };
    if (per_bucket >= 64 || !within_rows(blocks)) {
      const auto superblocks = static_cast<uint64_t>(superblock(last) - superblock(first) + 1);
      const uint64_t per_super = (superblocks + mp - 1) / mp;
      bucket_of = [=](int64_t step) {
        return static_cast<uint64_t>(superblock(step) - superblock(first)) / per_super;
      };
    }
  }
  std::vector<RankSeries> result;
  for (const auto& [rank, list] : by_rank) {
    RankSeries s{rank, {}};
    uint64_t current = 0;
    for (const Row& r : list) {
      const uint64_t b = bucket_of(r.step);
      if (s.points.empty() || b != current) {
        s.points.push_back({r.step, r.time, r.value, r.value, r.value});
        current = b;
        continue;
      }
      SeriesPoint& p = s.points.back();
      p.step = r.step;
      p.time = r.time;
      p.value = r.value;
      p.min = std::min(p.min, r.value);
      p.max = std::max(p.max, r.value);
    }
    result.push_back(std::move(s));
  }
  return result;
}

void expect_same(const std::vector<RankSeries>& got, const std::vector<RankSeries>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].rank, want[i].rank) << what;
    ASSERT_EQ(got[i].points.size(), want[i].points.size()) << what << ", rank " << got[i].rank;
    for (size_t j = 0; j < got[i].points.size(); ++j) {
      const SeriesPoint& g = got[i].points[j];
      const SeriesPoint& w = want[i].points[j];
      ASSERT_TRUE(g.step == w.step && g.time == w.time && g.value == w.value &&
                  g.min == w.min && g.max == w.max)
          << what << ", rank " << got[i].rank << ", point " << j << ": got step " << g.step
          << " value " << g.value << " min " << g.min << " max " << g.max << ", want step "
          << w.step << " value " << w.value << " min " << w.min << " max " << w.max
          << " (times " << g.time << ", " << w.time << ")";
    }
  }
}

// Every stored unit of the table (blocks of 64 steps, superblocks of 4,096) equals every key's
// aggregate recomputed from the metrics table over its steps, and every (rank, unit) with rows
// has one.
void expect_level_exact(Database& db, int64_t run, const Rows& truth, const std::string& table,
                        const std::string& unit, int64_t steps) {
  const auto first_of = [steps](int64_t u) { return u * steps; };
  const auto unit_of = [steps](int64_t step) { return step / steps - (step % steps < 0 ? 1 : 0); };
  std::map<std::pair<int, int64_t>, bool> wanted;
  for (const auto& [where, r] : truth) wanted[{where.first, unit_of(where.second)}] = false;
  Statement st(db, "SELECT rank, " + unit + ", aggregates FROM " + table + " WHERE run_id = ?");
  st.bind(1, run);
  while (st.step()) {
    const int rank = static_cast<int>(st.int64(0));
    const int64_t u = st.int64(1);
    ASSERT_TRUE(wanted.count({rank, u})) << table << " without rows: " << rank << "/" << u;
    wanted[{rank, u}] = true;
    const BlockAggregates stored = decode_block(st.blob(2));
    const BlockAggregates fresh = aggregate_rows(db, run, first_of(u), first_of(u) + steps - 1).at(rank);
    ASSERT_EQ(stored.size(), fresh.size());
    for (size_t k = 0; k < stored.size(); ++k) {
      ASSERT_EQ(stored[k].present(), fresh[k].present()) << metric_keys()[k] << " " << table << " " << u;
      if (!stored[k].present()) continue;
      EXPECT_TRUE(stored[k].min == fresh[k].min && stored[k].max == fresh[k].max &&
                  stored[k].last == fresh[k].last && stored[k].last_step == fresh[k].last_step &&
                  stored[k].last_time == fresh[k].last_time)
          << metric_keys()[k] << " of rank " << rank << ", " << table << " " << u;
    }
  }
  for (const auto& [where, seen] : wanted)
    EXPECT_TRUE(seen) << "no " << table << " row for rank " << where.first << ", " << unit << " " << where.second;
}

// Both levels of the rollup agree with the rows.
void expect_rollup_exact(Database& db, int64_t run, const Rows& truth) {
  expect_level_exact(db, run, truth, "metric_blocks", "block", kStepsPerBlock);
  expect_level_exact(db, run, truth, "metric_superblocks", "superblock", kStepsPerBlock * kBlocksPerSuperblock);
}

// An interval logged the way trainers log: a rank now and then missing, values often NULL,
// a later generation (a resumed run's) with other times and losses.
std::vector<MetricRow> random_interval(std::mt19937_64& rng, const std::vector<int>& ranks, int64_t step,
                                       double generation) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::bernoulli_distribution null_value(0.2), missing_rank(0.1);
  std::vector<MetricRow> rows;
  for (const int rank : ranks) {
    if (missing_rank(rng)) continue;
    MetricRow m;
    m.step = step;
    m.rank = rank;
    m.time = 1.7e9 + 0.5 * static_cast<double>(step) + generation;
    m.tokens = step * 4096;
    m.loss = null_value(rng) ? kNoValue : 3.0 + uniform(rng) + generation;
    m.grad_norm = null_value(rng) ? kNoValue : std::abs(uniform(rng)) * 10.0;
    if (!null_value(rng)) m.mem_used = static_cast<int64_t>(1e9 * (2.0 + uniform(rng)));
    rows.push_back(m);
  }
  return rows;
}

class MetricBlocksTest : public StoreTest {};

TEST(MetricBlocksMath, BlocksAreFloorDivisionsBy64) {
  EXPECT_EQ(block_of(0), 0);
  EXPECT_EQ(block_of(63), 0);
  EXPECT_EQ(block_of(64), 1);
  EXPECT_EQ(block_of(-1), -1);
  EXPECT_EQ(block_of(-64), -1);
  EXPECT_EQ(block_of(-65), -2);
  EXPECT_EQ(first_step_of(-2), -128);
  EXPECT_EQ(last_step_of(-1), -1);
  EXPECT_EQ(first_step_of(block_of(kMin)), kMin);  // the extremes do not overflow
  EXPECT_EQ(last_step_of(block_of(kMax)), kMax);
  EXPECT_EQ(superblock_of(block_of(4095)), 0);
  EXPECT_EQ(superblock_of(block_of(4096)), 1);
  EXPECT_EQ(superblock_of(block_of(-1)), -1);
  EXPECT_EQ(superblock_of(block_of(-4097)), -2);
  EXPECT_EQ(first_step_of(first_block_of(-2)), -8192);
  EXPECT_EQ(last_step_of(last_block_of(1)), 8191);
  EXPECT_EQ(first_step_of(first_block_of(superblock_of(block_of(kMin)))), kMin);
  EXPECT_EQ(last_step_of(last_block_of(superblock_of(block_of(kMax)))), kMax);
}

TEST(MetricBlocksMath, TheBlobIsLittleEndianAndRoundTrips) {
  BlockAggregates block(metric_keys().size());
  block[0].add(70, 1.5e9, 2.5);
  block[0].add(65, 1.4e9, -1.25);
  block[0].add(66, 1.45e9, 7.0);
  block[16].add(-3, 2.0, 42.0);
  const auto blob = encode_block(block);
  ASSERT_EQ(blob.size(), metric_keys().size() * 40);
  // Key 0's min, -1.25, is the first 8 bytes, least significant first.
  const auto bits = std::bit_cast<uint64_t>(-1.25);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(static_cast<uint8_t>(blob[static_cast<size_t>(i)]), (bits >> (8 * i)) & 0xff);
  const KeyAggregate loss = decode_key(blob, 0);
  EXPECT_EQ(loss.min, -1.25);
  EXPECT_EQ(loss.max, 7.0);
  EXPECT_EQ(loss.last, 2.5);  // the highest step's value, whatever the order added
  EXPECT_EQ(loss.last_step, 70);
  EXPECT_EQ(loss.last_time, 1.5e9);
  EXPECT_FALSE(decode_key(blob, 1).present());
  const BlockAggregates back = decode_block(blob);
  EXPECT_EQ(back[16].last_step, -3);
  EXPECT_EQ(back[16].max, 42.0);
  EXPECT_EQ(error_of([&] { decode_key(std::span(blob).first(40), 0); }),
            "store: a metric_blocks row holds 40 bytes, not 1000 (25 keys); the store needs a "
            "migration that rebuilds its blocks");
}

// A run logged the way trainers log: every 3rd step, sometimes a rank missing, values often
// NULL; then resumed from an earlier checkpoint, logging the same steps again with other
// values; an interval now and then logged twice before a commit. Commits vary in size.
TEST_F(MetricBlocksTest, RandomRunsReadFromBlocksMatchABruteForceOverTheRows) {
  std::mt19937_64 rng(20260501);
  std::bernoulli_distribution flush_now(0.05);
  const std::vector<int> kRanks = {0, 1, 5};
  Rows truth;
  RunWriter writer(path());
  const int64_t run = writer.create_run(run_info("random"));
  auto interval = [&](int64_t step, double generation) { return random_interval(rng, kRanks, step, generation); };
  for (int64_t step = -200; step <= 15000; step += 3) {
    log(writer, truth, interval(step, 0));
    if (flush_now(rng)) writer.flush();
  }
  writer.flush();
  for (int64_t step = 9001; step <= 21000; step += 3) {  // resumed from step 9001
    log(writer, truth, interval(step, 1));
    if (step % 997 == 0) log(writer, truth, interval(step, 2));  // the same step twice
    if (flush_now(rng)) writer.flush();
  }
  writer.flush();

  auto db = open_store(path(), Access::ReadOnly);
  expect_rollup_exact(*db, run, truth);

  const std::vector<std::string> keys = {"loss", "grad_norm", "mem_used", "time", "tokens"};
  const std::vector<size_t> points = {0, 1, 2, 7, 50, 100, 1000, 5000};
  std::uniform_int_distribution<int64_t> step_in(-300, 21100);
  int from_blocks = 0;
  for (int i = 0; i < 400; ++i) {
    SeriesQuery q;
    q.key = keys[static_cast<size_t>(rng() % keys.size())];
    if (rng() % 3 != 0) {
      for (const int rank : kRanks)
        if (rng() % 2) q.ranks.push_back(rank);
      if (rng() % 4 == 0) q.ranks.push_back(3);  // a rank that never logged
    }
    if (rng() % 4 != 0) q.first_step = step_in(rng);
    if (rng() % 4 != 0) q.last_step = std::max(q.first_step, step_in(rng));
    q.max_points = points[static_cast<size_t>(rng() % points.size())];
    const auto want = brute_force(truth, q);
    std::string what = q.key + " steps " + std::to_string(q.first_step) + ".." +
                       std::to_string(q.last_step) + " points " + std::to_string(q.max_points);
    expect_same(metric_series(*db, run, q), want, what);
    if (!want.empty() && q.max_points > 0 && want[0].points.size() > 1 &&
        want[0].points[1].step - want[0].points[0].step >= 64)
      ++from_blocks;
  }
  EXPECT_GT(from_blocks, 50);  // many queries took the block path
}

// A run long enough for many superblocks (-5,000..200,000, every 5th step), resumed from step
// 150,001 with other values (and some steps logged twice), then rewound to step 180,000 and
// trained on: after each, both levels equal a scan of the rows, and series of a few points,
// or bounded to few rows, read from superblocks give what the rows give.
TEST_F(MetricBlocksTest, LongRunsResumedAndRewoundReadFromSuperblocksAsFromTheRows) {
  std::mt19937_64 rng(20261129);
  std::bernoulli_distribution flush_now(0.01);
  const std::vector<int> kRanks = {0, 2, 3};
  Rows truth;
  RunWriter writer(path());
  const int64_t run = writer.create_run(run_info("long"));
  auto interval = [&](int64_t step, double generation) { return random_interval(rng, kRanks, step, generation); };
  auto db = open_store(path(), Access::ReadOnly);
  std::uniform_int_distribution<int64_t> step_in(-6000, 211000);
  int from_superblocks = 0;
  auto check = [&](const std::string& phase) {
    writer.flush();
    expect_rollup_exact(*db, run, truth);
    const std::vector<std::string> keys = {"loss", "grad_norm", "time"};
    const std::vector<size_t> points = {1, 2, 3, 7, 20, 60, 500};
    const std::vector<size_t> bounds = {0, 0, 50, 400, 3000};
    for (int i = 0; i < 60; ++i) {
      SeriesQuery q;
      q.key = keys[static_cast<size_t>(rng() % keys.size())];
      if (rng() % 3 == 0) q.ranks = {kRanks[static_cast<size_t>(rng() % kRanks.size())]};
      if (rng() % 3 != 0) q.first_step = step_in(rng);
      if (rng() % 3 != 0) q.last_step = std::max(q.first_step, step_in(rng));
      q.max_points = points[static_cast<size_t>(rng() % points.size())];
      q.max_rows = bounds[static_cast<size_t>(rng() % bounds.size())];
      const auto want = brute_force(truth, q);
      expect_same(metric_series(*db, run, q), want,
                  phase + ": " + q.key + " steps " + std::to_string(q.first_step) + ".." +
                      std::to_string(q.last_step) + " points " + std::to_string(q.max_points) + " rows " +
                      std::to_string(q.max_rows));
      if (!want.empty() && want[0].points.size() > 1 && want[0].points[1].step - want[0].points[0].step >= 4096)
        ++from_superblocks;
    }
  };
  for (int64_t step = -5000; step <= 200000; step += 5) {
    log(writer, truth, interval(step, 0));
    if (flush_now(rng)) writer.flush();
  }
  check("written");
  for (int64_t step = 150001; step <= 210000; step += 5) {  // resumed from step 150,001
    log(writer, truth, interval(step, 1));
    if (step % 997 == 0) log(writer, truth, interval(step, 2));  // the same step twice
    if (flush_now(rng)) writer.flush();
  }
  check("resumed");
  Rewind back;
  back.number = 1;
  back.spike_step = 205001;
  back.from_step = 210000;
  back.to_step = 180000;
  writer.log_rewind(back);
  for (auto it = truth.begin(); it != truth.end();)
    it = it->first.second > back.to_step ? truth.erase(it) : std::next(it);
  check("rewound");
  for (int64_t step = 180003; step <= 190000; step += 5) log(writer, truth, interval(step, 3));
  check("trained again");
  EXPECT_GT(from_superblocks, 40);
}

TEST_F(MetricBlocksTest, ASpikeSurvivesAndALoggedAgainStepReplacesItsExtremes) {
  Rows truth;
  RunWriter writer(path());
  const int64_t run = writer.create_run(run_info("resumed"));
  auto row = [](int64_t step, double loss) {
    MetricRow m;
    m.step = step;
    m.time = 1000.0 + static_cast<double>(step);
    m.loss = loss;
    return m;
  };
  for (int64_t step = 0; step < 200; ++step) log(writer, truth, {row(step, 1.0)});
  log(writer, truth, {row(100, 50.0)});  // a spike, logged again in the same commit
  writer.flush();
  auto db = open_store(path(), Access::ReadOnly);
  SeriesQuery q;
  q.max_points = 2;  // 200 steps: buckets of 128 steps (two blocks)
  auto series = metric_series(*db, run, q);
  ASSERT_EQ(series.size(), 1u);
  ASSERT_EQ(series[0].points.size(), 2u);
  EXPECT_EQ(series[0].points[0].max, 50.0);
  EXPECT_EQ(series[0].points[0].min, 1.0);
  EXPECT_EQ(series[0].points[0].step, 127);
  EXPECT_EQ(series[0].points[1].step, 199);

  // Resumed from a checkpoint at step 90: steps 90.. again, with other values. The block
  // holding the spike must drop it, though a max cannot forget a value.
  for (int64_t step = 90; step < 110; ++step) log(writer, truth, {row(step, 0.5)});
  writer.flush();
  series = metric_series(*db, run, q);
  ASSERT_EQ(series[0].points.size(), 2u);
  EXPECT_EQ(series[0].points[0].max, 1.0);
  EXPECT_EQ(series[0].points[0].min, 0.5);
  EXPECT_EQ(series[0].points[0].value, 1.0);
  EXPECT_EQ(series[0].points[0].step, 127);
  // A later step of the same block, logged again last: the block's last value follows it.
  log(writer, truth, {row(127, 3.0)});
  writer.flush();
  series = metric_series(*db, run, q);
  EXPECT_EQ(series[0].points[0].value, 3.0);
  EXPECT_EQ(series[0].points[0].max, 3.0);
  EXPECT_EQ(series[0].points[0].time, 1127.0);
  expect_same(series, brute_force(truth, q), "after the resume");
  expect_rollup_exact(*db, run, truth);
}

TEST_F(MetricBlocksTest, ACommitCountsAStepLoggedTwiceOnceAndValuesAsStored) {
  auto db = open_store(path(), Access::ReadWrite);
  db->exec("INSERT INTO runs (name, created_at) VALUES ('twice', 0)");
  const int64_t run = db->last_insert_rowid();
  std::vector<MetricRow> rows(4);
  const int64_t steps[] = {3, 5, 7, 5};
  const double losses[] = {2.0, 50.0, 3.0, 1.0};  // step 5's 50 is replaced by 1
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].step = steps[i];
    rows[i].time = 100.0 + static_cast<double>(i);
    rows[i].loss = losses[i];
  }
  Transaction tx(*db);
  for (const auto& r : rows) insert_metric(*db, run, r);
  BlockUpdate blocks;
  blocks.add(rows);
  blocks.write(*db, run);
  tx.commit();
  Statement st(*db, "SELECT aggregates FROM metric_blocks WHERE run_id = ? AND block = 0");
  st.bind(1, run);
  ASSERT_TRUE(st.step());
  const KeyAggregate loss = decode_key(st.blob(0), key_index("loss"));
  EXPECT_EQ(loss.min, 1.0);
  EXPECT_EQ(loss.max, 3.0);
  EXPECT_EQ(loss.last, 3.0);
  EXPECT_EQ(loss.last_step, 7);
  EXPECT_EQ(loss.last_time, 102.0);
  const KeyAggregate time = decode_key(st.blob(0), key_index("time"));
  EXPECT_EQ(time.min, 100.0);
  EXPECT_EQ(time.max, 103.0);
  st.reset();

  // Appended (step 8 is new), the row's values are aggregated as the store reads them back:
  // SQLite keeps an integral REAL as an integer, so -0.0 comes back as 0.0.
  MetricRow zero;
  zero.step = 8;
  zero.time = 200.0;
  zero.grad_norm = -0.0;
  Transaction append(*db);
  insert_metric(*db, run, zero);
  blocks.add(std::span(&zero, 1));
  blocks.write(*db, run);
  append.commit();
  Statement raw(*db, "SELECT grad_norm FROM metrics WHERE run_id = ? AND step = 8");
  raw.bind(1, run);
  ASSERT_TRUE(raw.step());
  st.bind(1, run);
  ASSERT_TRUE(st.step());
  const KeyAggregate grad_norm = decode_key(st.blob(0), key_index("grad_norm"));
  EXPECT_EQ(std::signbit(grad_norm.max), std::signbit(raw.real(0)));
  EXPECT_EQ(decode_key(st.blob(0), key_index("loss")).max, 3.0);
}

TEST_F(MetricBlocksTest, StepsLoggedAtAnIntervalLeaveSparseBlocks) {
  Rows truth;
  RunWriter writer(path());
  const int64_t run = writer.create_run(run_info("sparse"));
  auto loss = [](int64_t step, int rank) { return 10.0 + rank - 1e-4 * static_cast<double>(step); };
  for (int64_t step = 0; step < 100000; step += 100) {
    std::vector<MetricRow> rows;
    for (int rank = 0; rank < 2; ++rank) {
      MetricRow m;
      m.step = step;
      m.rank = rank;
      m.time = 1000.0 + static_cast<double>(step);
      m.loss = loss(step, rank);  // falling
      rows.push_back(m);
    }
    log(writer, truth, std::move(rows));
  }
  writer.flush();
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metric_blocks"), 2 * 1000);  // one per row
  SeriesQuery q;
  q.ranks = {1};
  q.max_points = 100;
  const auto series = metric_series(*db, run, q);
  ASSERT_EQ(series.size(), 1u);
  // Blocks 0..1560 (steps 0..99,903), 16 per bucket: 98 buckets of 1024 steps.
  ASSERT_EQ(series[0].points.size(), 98u);
  for (size_t b = 0; b < series[0].points.size(); ++b) {
    const int64_t begin = static_cast<int64_t>(b) * 1024;
    const int64_t first = (begin + 99) / 100 * 100;
    const int64_t last = std::min<int64_t>((begin + 1023) / 100 * 100, 99900);
    const SeriesPoint& p = series[0].points[b];
    EXPECT_EQ(p.step, last);
    EXPECT_EQ(p.value, loss(last, 1));
    EXPECT_EQ(p.min, p.value);
    EXPECT_EQ(p.max, loss(first, 1));
  }
  expect_same(series, brute_force(truth, q), "sparse");
}

TEST_F(MetricBlocksTest, NegativeStepsAndRangesInsideOneBlock) {
  Rows truth;
  RunWriter writer(path());
  const int64_t run = writer.create_run(run_info("negative"));
  for (int64_t step = -300; step < 300; ++step) {
    MetricRow m;
    m.step = step;
    m.time = 1000.0 + static_cast<double>(step);  // the writer stamps a time <= 0 with now
    m.loss = static_cast<double>((step * 37) % 101);
    log(writer, truth, {m});
  }
  writer.flush();
  auto db = open_store(path(), Access::ReadOnly);
  for (const auto& [first, last, points] : std::vector<std::tuple<int64_t, int64_t, size_t>>{
           {kMin, kMax, 3}, {-300, 299, 9}, {-130, 70, 3}, {-64, -1, 1}, {-63, -2, 1},
           {5, 60, 1}, {-1, 0, 1}, {-200, -100, 1}, {0, 0, 1}}) {
    SeriesQuery q;
    q.first_step = first;
    q.last_step = last;
    q.max_points = points;
    expect_same(metric_series(*db, run, q), brute_force(truth, q),
                std::to_string(first) + ".." + std::to_string(last));
  }
  expect_rollup_exact(*db, run, truth);
}

TEST_F(MetricBlocksTest, RemovingARunRemovesItsBlocks) {
  int64_t gone = 0, kept = 0;
  {
    RunWriter a(path());
    gone = a.create_run(run_info("gone"));
    for (int64_t step = 0; step < 300; ++step) a.log_metrics(testing_util::interval(step, 2));
    a.finish(RunStatus::Completed);
    a.flush();
    RunWriter b(path());
    kept = b.create_run(run_info("kept"));
    for (int64_t step = 0; step < 100; ++step) b.log_metrics(testing_util::interval(step, 2));
    b.finish(RunStatus::Completed);
    b.flush();
  }
  auto db = open_store(path(), Access::ReadWrite);
  auto blocks_of = [&](int64_t run) {
    return db->query_int("SELECT count(*) FROM metric_blocks WHERE run_id = " +
                         std::to_string(run));
  };
  EXPECT_EQ(blocks_of(gone), 2 * 5);  // 2 ranks x blocks 0..4
  EXPECT_EQ(blocks_of(kept), 2 * 2);
  remove_run(*db, gone);
  EXPECT_EQ(blocks_of(gone), 0);
  EXPECT_EQ(blocks_of(kept), 4);
  SeriesQuery q;
  q.max_points = 1;
  const auto series = metric_series(*db, kept, q);
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[1].points.at(0).step, 99);
  EXPECT_EQ(series[1].points[0].value, testing_util::loss_of(99, 1));
  EXPECT_EQ(series[1].points[0].max, testing_util::loss_of(0, 1));
}

}  // namespace
}  // namespace kiln::store
