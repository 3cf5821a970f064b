#include "store/schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <tuple>
#include <vector>

#include "base/check.h"
#include "store/metric_blocks.h"
#include "store/metric_queries.h"
#include "store/metric_spread.h"
#include "store/rows.h"
#include "store/run_details.h"
#include "store/run_queries.h"
#include "store/rewind_rows.h"
#include "store/run_writer.h"
#include "store/sample_queries.h"
#include "store/spread_blocks.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;

using testing_util::as_unprivileged;
using testing_util::StoreTest;
namespace fs = std::filesystem;

class SchemaTest : public StoreTest {};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A store with one run and a few metric rows, closed (so its -wal is folded in).
void make_store(const std::string& path) {
  RunWriter writer(path);
  writer.create_run(testing_util::run_info("first"));
  writer.log_metrics(testing_util::interval(0, 2));
  writer.finish(RunStatus::Completed);
  writer.flush();
}

// A store migrated to `version` only, holding the rows `sql` inserts, then opened by this
// kiln: migrated to the current version.
std::unique_ptr<Database> migrated_from(const std::string& path, size_t version, const std::string& sql) {
  {
    Database db(path, Access::ReadWrite);
    migrate(db, migrations().first(version));
    db.exec(sql);
  }
  auto db = open_store(path, Access::ReadWrite);
  EXPECT_EQ(db->query_int("PRAGMA user_version"), schema_version());
  return db;
}

// The blocks of a run's rows in first_block..last_block, as a writer before version 20 left
// them: without superblocks, whose table BlockUpdate writes now.
void insert_blocks_before_20(Database& db, int64_t run, int64_t last_block, int64_t first_block = 0) {
  for (int64_t block = first_block; block <= last_block; ++block)
    for (const auto& [rank, keys] : aggregate_rows(db, run, first_step_of(block), last_step_of(block)))
      db.cached("INSERT INTO metric_blocks (run_id, rank, block, aggregates) VALUES (?, ?, ?, ?)")
          .bind_all(run, rank, block, encode_block(keys))
          .run();
}

TEST_F(SchemaTest, CreatesEveryTableAtTheCurrentVersion) {
  auto db = open_store(path(), Access::ReadWrite);
  EXPECT_EQ(schema_version(), 20);
  EXPECT_EQ(db->query_int("PRAGMA user_version"), schema_version());
  EXPECT_EQ(db->query_int("PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(db->query_text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(db->query_int("PRAGMA synchronous"), 1);  // NORMAL
  EXPECT_EQ(db->query_int("PRAGMA foreign_keys"), 1);
  std::vector<std::string> tables;
  Statement st(*db, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name");
  while (st.step()) tables.push_back(st.text(0));
  EXPECT_EQ(tables, (std::vector<std::string>{"alerts", "checkpoints", "commands", "events", "expert_loads",
                                              "metric_blocks", "metric_spread", "metric_superblocks", "metrics", "rewinds", "rewound_losses",
                                              "run_ranks", "runs", "samples", "spread_blocks",
                                              "sweep_points", "sweeps", "system_metrics", "valid_metrics"}));
  // Reopening a current store changes nothing.
  db.reset();
  db = open_store(path(), Access::ReadWrite);
  EXPECT_EQ(db->query_int("PRAGMA user_version"), schema_version());
}

TEST_F(SchemaTest, MigratesAnEmptyFileFromVersionZero) {
  spit(path(), "");  // what `touch kiln-runs.db` leaves: a version-0 SQLite database
  auto db = open_store(path(), Access::ReadWrite);
  EXPECT_EQ(db->query_int("PRAGMA user_version"), schema_version());
  EXPECT_EQ(db->query_int("SELECT count(*) FROM runs"), 0);
}

TEST_F(SchemaTest, VersionTwoAddsThePidAndScrubsTokensFromRecordedCommandLines) {
  {
    Database db(path(), Access::ReadWrite);
    migrate(db, migrations().first(1));
    db.exec("INSERT INTO runs (name, command_line, created_at) VALUES "
            "('leaky', 'kiln train --serve 0.0.0.0:8080 --token s3cret --set hub.api_key=abc', 1), "
            "('plain', 'kiln train --name plain', 1)");
  }
  auto db = open_store(path(), Access::ReadWrite);
  EXPECT_EQ(db->query_int("PRAGMA user_version"), schema_version());
  EXPECT_EQ(db->query_text("SELECT command_line FROM runs WHERE name = 'leaky'"),
            "kiln train --serve 0.0.0.0:8080 --token *** --set hub.api_key=***");
  EXPECT_EQ(db->query_text("SELECT command_line FROM runs WHERE name = 'plain'"), "kiln train --name plain");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM runs WHERE pid IS NULL"), 2);
}

TEST_F(SchemaTest, VersionThreeAddsHostMemoryAndSamplesAndKeepsOlderReadings) {
  auto db = migrated_from(
      path(), 2,
      "INSERT INTO runs (name, created_at) VALUES ('old', 1);"
      "INSERT INTO system_metrics (run_id, rank, time, cpu_percent, rss_bytes) VALUES (1, 0, 5, 99, 1024)");
  const std::vector<SystemRow> system = list_system(*db, 1);
  ASSERT_EQ(system.size(), 1u);
  EXPECT_EQ(system[0].rss_bytes, 1024);
  EXPECT_FALSE(system[0].host_mem_used.has_value()) << "not measured before version 3";
  EXPECT_FALSE(system[0].host_mem_total.has_value());
  EXPECT_EQ(db->query_int("SELECT count(*) FROM samples"), 0);
  EXPECT_TRUE(run_details(*db, 1).latest_samples.empty());
}

TEST_F(SchemaTest, VersionFourAddsExpertLoadsAndKeepsOlderRows) {
  {
    Database db(path(), Access::ReadWrite);
    migrate(db, migrations().first(3));
    db.exec("INSERT INTO runs (name, created_at) VALUES ('dense', 1);"
            "INSERT INTO samples (run_id, step, time, prompt, text) VALUES (1, 4, 5, 'Once', ' upon');"
            "INSERT INTO valid_metrics (run_id, step, time, loss) VALUES (1, 4, 5, 2.75)");
  }
  auto db = open_store(path(), Access::ReadWrite);
  EXPECT_EQ(db->query_int("PRAGMA user_version"), schema_version());
  const RunDetails details = run_details(*db, 1);
  EXPECT_EQ(details.run.name, "dense");
  ASSERT_EQ(details.latest_samples.size(), 1u);
  EXPECT_EQ(details.latest_samples[0].text, " upon");
  ASSERT_EQ(list_valid(*db, 1).size(), 1u);
  EXPECT_DOUBLE_EQ(list_valid(*db, 1)[0].loss, 2.75);
  EXPECT_TRUE(details.latest_experts.empty()) << "a run from before version 4 has no experts";
  EXPECT_EQ(db->query_int("SELECT count(*) FROM expert_loads"), 0);
}

TEST_F(SchemaTest, VersionFiveAddsTheAllToAllTimeToRowsAndBlocks) {
  // A version-4 block holds 17 keys' aggregates (all zero here: present, value 0).
  {
    Database db(path(), Access::ReadWrite);
    migrate(db, migrations().first(4));
    db.exec("INSERT INTO runs (name, created_at) VALUES ('dense', 1);"
            "INSERT INTO metrics (run_id, step, rank, time, loss) VALUES (1, 3, 0, 5, 2.5);"
            "INSERT INTO metric_blocks (run_id, rank, block, aggregates) VALUES (1, 0, 0, zeroblob(680))");
  }
  auto db = open_store(path(), Access::ReadWrite);
  EXPECT_EQ(db->query_int("PRAGMA user_version"), schema_version());
  Statement& st = db->cached("SELECT aggregates FROM metric_blocks WHERE run_id = 1");
  ASSERT_TRUE(st.step());
  const std::span<const std::byte> blob = st.blob(0);
  const BlockAggregates block = decode_block(blob);
  // The aggregate the migration appends is the one the writer writes for a key without a value.
  const std::vector<std::byte> empty = encode_block(BlockAggregates(metric_keys().size()));
  EXPECT_TRUE(std::equal(blob.end() - 40, blob.end(), empty.end() - 40));
  st.reset();
  ASSERT_EQ(block.size(), metric_keys().size());
  EXPECT_TRUE(block[key_index("loss")].present());
  EXPECT_FALSE(block[key_index("a2a_ms")].present()) << "no row of version 4 measured it";
  const std::vector<MetricRow> rows = run_details(*db, 1).latest;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].loss, 2.5);
  EXPECT_TRUE(std::isnan(rows[0].a2a_ms));
}

TEST_F(SchemaTest, VersionSixAddsTheRunsPlanAndLeavesOlderRunsUnplanned) {
  {
    auto db = migrated_from(
        path(), 5,
        "INSERT INTO runs (name, layout, created_at) VALUES ('old', 'tp1.pp1.dp1', 1);"
        "INSERT INTO metrics (run_id, step, rank, time, loss, tokens_per_s) VALUES (1, 3, 0, 5, 2.5, 900)");
    const RunRecord old = get_run(*db, 1);
    EXPECT_EQ(old.name, "old");
    EXPECT_EQ(old.layout, "tp1.pp1.dp1");
    EXPECT_EQ(old.last_step, 3);
    EXPECT_TRUE(std::isnan(old.planned_step_s)) << "a run from before version 6 has no plan";
    EXPECT_FALSE(old.planned_memory_bytes.has_value());
    EXPECT_DOUBLE_EQ(run_details(*db, 1).latest.at(0).tokens_per_s, 900);
  }
  // The migrated store records a new run's plan.
  RunWriter writer(path());
  RunInfo info = testing_util::run_info("new");
  info.planned_step_s = 0.25;
  info.planned_memory_bytes = 4096;
  const int64_t id = writer.create_run(info);
  writer.finish(RunStatus::Completed);
  writer.flush();
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_DOUBLE_EQ(get_run(*db, id).planned_step_s, 0.25);
  EXPECT_EQ(get_run(*db, id).planned_memory_bytes, 4096);
}

// Version 7 rebuilds `runs` and `commands` to allow `released` and `release`: every row of
// every table that refers to a run survives the rebuild, foreign keys included.
TEST_F(SchemaTest, VersionSevenRebuildsRunsAndCommandsAndKeepsEveryRow) {
  {
    auto db = migrated_from(
        path(), 6,
        "INSERT INTO runs (name, status, layout, created_at, tags, planned_step_s) "
        "  VALUES ('old', 'stopped', 'tp1.pp1.dp2', 1, '[\"a\"]', 0.5);"
        "INSERT INTO metrics (run_id, step, rank, time, loss) VALUES (1, 3, 0, 5, 2.5), (1, 3, 1, 5, 2.6);"
        "INSERT INTO events (run_id, time, kind, message) VALUES (1, 5, 'end', 'stopped');"
        "INSERT INTO commands (run_id, created_at, action, status) VALUES (1, 4, 'stop', 'applied');"
        "INSERT INTO checkpoints (run_id, step, path, time) VALUES (1, 3, '/c/step-3', 5)");
    const RunRecord old = get_run(*db, 1);
    EXPECT_EQ(old.name, "old");
    EXPECT_EQ(old.status, RunStatus::Stopped);
    EXPECT_EQ(old.tags, std::vector<std::string>{"a"});
    EXPECT_DOUBLE_EQ(old.planned_step_s, 0.5);
    EXPECT_EQ(old.last_step, 3);
    EXPECT_FALSE(old.parent_id.has_value());
    EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics"), 2);
    EXPECT_EQ(db->query_int("SELECT count(*) FROM events"), 1);
    EXPECT_EQ(db->query_int("SELECT count(*) FROM commands WHERE action = 'stop'"), 1);
    EXPECT_EQ(db->query_int("SELECT count(*) FROM checkpoints"), 1);
    EXPECT_EQ(db->query_int("PRAGMA foreign_keys"), 1) << "back on after the rebuild";
    // The rebuilt tables take the new values, and deleting a run still cascades.
    db->exec("UPDATE runs SET status = 'released' WHERE id = 1");
    db->exec("INSERT INTO commands (run_id, created_at, action) VALUES (1, 6, 'release')");
    db->exec("DELETE FROM runs WHERE id = 1");
    EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics"), 0);
    EXPECT_EQ(db->query_int("SELECT count(*) FROM commands"), 0);
  }
  // A fork records its parent by name and the step it started from.
  RunWriter parent_writer(path());
  parent_writer.create_run(testing_util::run_info("parent"));
  parent_writer.finish(RunStatus::Completed);
  parent_writer.flush();
  RunWriter writer(path());
  RunInfo info = testing_util::run_info("child");
  info.parent_name = "parent";
  info.parent_step = 8;
  info.workdir = "/home/me/work";
  info.world_size = 2;
  const int64_t id = writer.create_run(info);
  writer.finish(RunStatus::Released);
  writer.flush();
  auto db = open_store(path(), Access::ReadOnly);
  const RunRecord child = get_run(*db, id);
  EXPECT_EQ(child.parent_id, find_run_named(*db, "parent"));
  EXPECT_EQ(child.parent_step, 8);
  EXPECT_EQ(child.workdir, "/home/me/work");
  EXPECT_EQ(child.world_size, 2);
  EXPECT_EQ(child.status, RunStatus::Released);
  EXPECT_TRUE(child.ended_at.has_value());
}

// Version 8 adds how a run was launched; a run recorded before has none (and is relaunched
// without its dashboard), and the column holds JSON or nothing.
TEST_F(SchemaTest, VersionEightAddsTheLaunchRecordAndOlderRunsHaveNone) {
  auto db = migrated_from(path(), 7, "INSERT INTO runs (name, created_at) VALUES ('old', 1)");
  EXPECT_EQ(get_run(*db, 1).launch_json, "");
  EXPECT_NE(error_of([&] { db->exec("UPDATE runs SET launch = 'kiln train -c/evil.json' WHERE id = 1"); }),
            "(no error)");
  db->exec(R"(UPDATE runs SET launch = '{"serve":"127.0.0.1:8080"}' WHERE id = 1)");
  EXPECT_EQ(get_run(*db, 1).launch_json, R"({"serve":"127.0.0.1:8080"})");
}

TEST_F(SchemaTest, VersionNineRecordsHowASweepEndedAndOlderEndedSweepsReadEnded) {
  auto db = migrated_from(path(), 8,
                          "INSERT INTO sweeps (name, created_at, ended_at) VALUES ('done', 1, 2);"
                          "INSERT INTO sweeps (name, created_at) VALUES ('going', 1)");
  EXPECT_EQ(db->query_text("SELECT group_concat(name || ':' || status, ' ') FROM sweeps"), "done:ended going:live");
  EXPECT_NE(error_of([&] { db->exec("UPDATE sweeps SET status = 'finished'"); }), "(no error)");
}

TEST_F(SchemaTest, VersionElevenKeysSamplesByPromptAndKeepsOlderOnesAsTheFirst) {
  auto db = migrated_from(path(), 10,
                          "INSERT INTO runs (name, created_at) VALUES ('old', 1);"
                          "INSERT INTO samples (run_id, step, time, prompt, text, temperature) "
                          "VALUES (1, 4, 5, 'Once', ' upon', 0.8), (1, 8, 9, 'Once', ' a time', 0.8)");
  const std::vector<Sample> samples = list_samples(*db, 1, 10);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].step, 8);
  EXPECT_EQ(samples[1].slot, 0);
  EXPECT_EQ(samples[1].text, " a time");
  EXPECT_DOUBLE_EQ(samples[1].temperature, 0.8);
  db->exec("INSERT INTO samples (run_id, step, slot, time, prompt, text) VALUES (1, 8, 1, 9, 'Twice', ' more')");
  EXPECT_EQ(latest_samples(*db, 1).size(), 2u);
  EXPECT_NE(error_of([&] { db->exec("INSERT INTO samples (run_id, step, slot, time) VALUES (1, 8, 1, 10)"); }),
            "(no error)") << "one sample per prompt and step";
  db->exec("DELETE FROM runs");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM samples"), 0) << "removed with their run";
}

TEST_F(SchemaTest, VersionTwelveAddsRewindsAndOlderRunsHaveNone) {
  auto db = migrated_from(path(), 11,
                          "INSERT INTO runs (name, created_at) VALUES ('old', 1);"
                          "INSERT INTO metrics (run_id, step, rank, time, loss) VALUES (1, 7, 0, 8, 2.5)");
  EXPECT_TRUE(list_rewinds(*db, 1).empty());
  Rewind back;
  back.number = 1;
  back.spike_step = 7;
  back.from_step = 7;
  back.to_step = 5;
  back.first_skipped_batch = 6;
  back.skipped_batches = 10;
  {
    Transaction tx(*db);
    insert_rewind(*db, 1, back);
    tx.commit();
  }
  const std::vector<Rewind> rewinds = list_rewinds(*db, 1);
  ASSERT_EQ(rewinds.size(), 1u);
  ASSERT_EQ(rewinds[0].losses.size(), 1u);
  EXPECT_EQ(rewinds[0].losses[0].step, 7);
  EXPECT_DOUBLE_EQ(rewinds[0].losses[0].loss, 2.5);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics"), 0);
}

TEST_F(SchemaTest, VersionSeventeenBuildsTheSpreadOfWideStepsAndPrunesOldRowsButTheirBlocks) {
  // A version-16 store: one run of 10 ranks (wide) over kRecentSteps + 3 steps with its blocks,
  // and one of 2 ranks, as that version's writer left them.
  const int64_t steps = kRecentSteps + 3;
  {
    Database db(path(), Access::ReadWrite);
    migrate(db, migrations().first(16));
    Transaction tx(db);
    db.exec("INSERT INTO runs (name, created_at) VALUES ('wide', 1), ('narrow', 1)");
    for (int64_t step = 0; step < steps; ++step) {
      std::vector<MetricRow> rows = testing_util::interval(step, 10);
      for (MetricRow& r : rows) r.fwd_ms = r.rank == 7 && step == 1 ? 90.0 : 2.0 + r.rank;
      for (const MetricRow& r : rows) insert_metric(db, 1, r);
      for (const MetricRow& r : testing_util::interval(step, 2)) insert_metric(db, 2, r);
    }
    for (const int64_t run : {1, 2}) insert_blocks_before_20(db, run, block_of(steps - 1));
    tx.commit();
  }
  auto db = open_store(path(), Access::ReadWrite);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metric_spread WHERE run_id = 1"), steps);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metric_spread WHERE run_id = 2"), 0);
  const auto first = spread_series(*db, 1, "fwd_ms", 1, 1, 0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].ranks, 10);
  EXPECT_EQ(first[0].min, 2.0);
  EXPECT_EQ(first[0].max, 90.0);
  EXPECT_EQ(first[0].slow_rank, 7);
  EXPECT_DOUBLE_EQ(first[0].mean, (2.0 + 3 + 4 + 5 + 6 + 7 + 8 + 90 + 10 + 11) / 10);
  const auto rate = spread_series(*db, 1, "tokens_per_s", 1, 1, 0);
  ASSERT_EQ(rate.size(), 1u);
  EXPECT_EQ(rate[0].slow_rank, 0);  // 1000 (r + 1) tokens/s: rank 0 is the slowest
  // The 3 steps before the window kept rank 0's rows only; the narrow run kept all.
  EXPECT_EQ(db->query_int("SELECT min(step) FROM metrics WHERE run_id = 1 AND rank <> 0"), 3);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics WHERE run_id = 1 AND rank = 0"), steps);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics WHERE run_id = 2"), 2 * steps);
  // Rank 7's block 0 still holds its spike of step 1.
  SeriesQuery q;
  q.key = "fwd_ms";
  q.ranks = {7};
  q.last_step = 63;
  q.max_points = 1000;
  const auto rank7 = metric_series(*db, 1, q);
  ASSERT_EQ(rank7.size(), 1u);
  ASSERT_EQ(rank7[0].points.size(), 1u);
  EXPECT_EQ(rank7[0].points[0].max, 90.0);
}

TEST_F(SchemaTest, VersionEighteenRollsTheStoredSpreadUpIntoBlocks) {
  // A version-17 store: the spread of run 1's steps 1, 2 and 70 as that version's writer left
  // it (fwd_ms measured, the other fields not), and run 2 without any.
  auto db = migrated_from(
      path(), 17,
      "INSERT INTO runs (name, created_at) VALUES ('wide', 1), ('narrow', 1);"
      "INSERT INTO metric_spread (run_id, step, time, ranks, top_rank, fwd_ms_min, fwd_ms_max, fwd_ms_sum, "
      "fwd_ms_count, fwd_ms_min_rank, fwd_ms_max_rank) VALUES "
      "(1, 1, 101, 10, 9, 2, 9, 40, 10, 3, 4), (1, 2, 102, 12, 11, 1, 9, 50, 12, 0, 1), "
      "(1, 70, 170, 9, 8, 5, 5, 45, 9, 0, 0)");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM spread_blocks WHERE run_id = 2"), 0);
  const auto blocks = read_field_blocks(*db, 1, *find_metric_field("fwd_ms"), 0, 10);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].block, 0);
  EXPECT_EQ(blocks[0].part.step, 2);
  EXPECT_EQ(blocks[0].part.time, 102.0);
  EXPECT_EQ(blocks[0].part.ranks, 12);
  const FieldSpread& first = blocks[0].part.spread;
  EXPECT_EQ(first.min, 1.0);
  EXPECT_EQ(first.min_rank, 0);
  EXPECT_EQ(first.max, 9.0);
  EXPECT_EQ(first.max_rank, 4);  // step 1's: a tie keeps the earlier step's rank
  EXPECT_EQ(first.sum, 90.0);
  EXPECT_EQ(first.count, 22);
  EXPECT_EQ(blocks[1].block, 1);
  EXPECT_EQ(blocks[1].part.step, 70);
  EXPECT_EQ(blocks[1].part.spread.sum, 45.0);
  EXPECT_FALSE(read_field_blocks(*db, 1, *find_metric_field("tokens_per_s"), 0, 0).at(0).part.spread.present());
  // A chart of the three steps in one point reads the two blocks.
  const auto points = spread_series(*db, 1, "fwd_ms", 0, 1000, 1);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].step, 70);
  EXPECT_EQ(points[0].slow_rank, 4);
  EXPECT_EQ(points[0].mean, 135.0 / 31);
}

TEST_F(SchemaTest, VersionNineteenKeepsTheBlocksWithoutOverflowPages) {
  // A version-18 store's blocks, two ranks of two blocks each, with aggregates of today's size.
  const std::string blob = "x'" + std::string(2 * kKeyAggregateBytes * metric_keys().size(), 'a') + "'";
  auto db = migrated_from(path(), 18,
                          "INSERT INTO runs (name, created_at) VALUES ('blocks', 1);"
                          "INSERT INTO metric_blocks (run_id, rank, block, aggregates) VALUES (1, 0, 0, " + blob +
                              "), (1, 0, 1, " + blob + "), (1, 1, 0, " + blob + "), (1, 1, 1, " + blob + ")");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metric_blocks WHERE run_id = 1 AND aggregates = " + blob), 4);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metric_blocks WHERE rank = 1 AND block = 1"), 1);
  // A block's 1,000 bytes sit in its table's page, not on an overflow page each.
  EXPECT_EQ(kKeyAggregateBytes * metric_keys().size(), 1000u);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM dbstat WHERE name = 'metric_blocks' AND pagetype = 'overflow'"), 0);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM dbstat WHERE name = 'metric_blocks'"), 1);
}

// Two runs' rows over steps -300..13,000 (three ranks, values now and then NULL, one rank
// missing at some steps; and one rank), each row's values from its step and rank.
std::vector<MetricRow> superblock_rows(int64_t run) {
  std::vector<MetricRow> rows;
  for (int64_t step = -300; step <= 13000; step += 7)
    for (int rank = 0; rank < (run == 1 ? 3 : 1); ++rank) {
      if (rank == 2 && step % 5 == 0) continue;
      MetricRow m;
      m.step = step;
      m.rank = rank;
      m.time = 1000.0 + static_cast<double>(step);
      m.loss = step % 11 == 0 ? kNoValue : static_cast<double>((step * 37 + rank * 101) % 1009);
      m.grad_norm = static_cast<double>(rank) + 1e-3 * static_cast<double>(step);
      rows.push_back(m);
    }
  return rows;
}

// The superblocks table, row by row, in key order.
std::vector<std::tuple<int64_t, int64_t, int64_t, std::vector<std::byte>>> superblock_table(Database& db) {
  std::vector<std::tuple<int64_t, int64_t, int64_t, std::vector<std::byte>>> table;
  Statement st(db, "SELECT run_id, rank, superblock, aggregates FROM metric_superblocks ORDER BY 1, 2, 3");
  while (st.step()) {
    const auto blob = st.blob(3);
    table.emplace_back(st.int64(0), st.int64(1), st.int64(2), std::vector<std::byte>(blob.begin(), blob.end()));
  }
  return table;
}

TEST_F(SchemaTest, VersionTwentyRollsTheBlocksUpIntoSuperblocksAsTheWriterDoes) {
  {
    Database db(path(), Access::ReadWrite);
    migrate(db, migrations().first(19));
    Transaction tx(db);
    db.exec("INSERT INTO runs (name, created_at) VALUES ('three', 1), ('one', 1)");
    for (const int64_t run : {1, 2}) {
      for (const MetricRow& r : superblock_rows(run)) insert_metric(db, run, r);
      insert_blocks_before_20(db, run, block_of(13000), block_of(-300));
    }
    tx.commit();
  }
  auto migrated = open_store(path(), Access::ReadWrite);
  // The same rows through today's writer path.
  auto fresh = open_store(path("fresh.db"), Access::ReadWrite);
  fresh->exec("INSERT INTO runs (name, created_at) VALUES ('three', 1), ('one', 1)");
  for (const int64_t run : {1, 2}) {
    Transaction tx(*fresh);
    const std::vector<MetricRow> rows = superblock_rows(run);
    for (const MetricRow& r : rows) insert_metric(*fresh, run, r);
    BlockUpdate blocks;
    blocks.add(rows);
    blocks.write(*fresh, run);
    tx.commit();
  }
  const auto table = superblock_table(*migrated);
  EXPECT_EQ(table.size(), 3u * 5 + 5);  // superblocks -1..3 of each rank
  EXPECT_TRUE(table == superblock_table(*fresh));
  // Rank 1's superblock 1 (steps 4096..8191), its loss: (37 step + 101) mod 1009 over the
  // steps logged there with a loss.
  double min = INFINITY, max = -INFINITY, last = 0;
  int64_t last_step = 0;
  for (int64_t step = -300; step <= 13000; step += 7)
    if (step >= 4096 && step <= 8191 && step % 11 != 0) {
      last = static_cast<double>((step * 37 + 101) % 1009);
      min = std::min(min, last);
      max = std::max(max, last);
      last_step = step;
    }
  const auto& [run, rank, superblock, blob] = table[5 + 2];  // after rank 0's five, -1 and 0
  ASSERT_TRUE(run == 1 && rank == 1 && superblock == 1);
  const KeyAggregate loss = decode_key(blob, key_index("loss"));
  EXPECT_EQ(loss.min, min);
  EXPECT_EQ(loss.max, max);
  EXPECT_EQ(loss.last, last);
  EXPECT_EQ(loss.last_step, last_step);
  EXPECT_EQ(loss.last_step, 8191);
  EXPECT_EQ(loss.last_time, 1000.0 + 8191);
}

TEST_F(SchemaTest, AppliesANewerMigrationAndKeepsTheRows) {
  make_store(path());
  std::vector<Migration> next(migrations().begin(), migrations().end());
  next.push_back({"ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 3;"
                  "CREATE TABLE extras (run_id INTEGER, x TEXT);"});
  Database db(path(), Access::ReadWrite);
  migrate(db, next);
  EXPECT_EQ(db.query_int("PRAGMA user_version"), schema_version() + 1);
  EXPECT_EQ(db.query_int("SELECT priority FROM runs WHERE name = 'first'"), 3);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM metrics"), 2);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM extras"), 0);
  migrate(db, next);  // already there: nothing to do
  EXPECT_EQ(db.query_int("PRAGMA user_version"), schema_version() + 1);
}

TEST_F(SchemaTest, AFailedMigrationLeavesTheOldVersionWhole) {
  make_store(path());
  std::vector<Migration> next(migrations().begin(), migrations().end());
  next.push_back({"CREATE TABLE extras (x); ALTER TABLE no_such_table ADD COLUMN y;"});
  Database db(path(), Access::ReadWrite);
  EXPECT_EQ(error_of([&] { migrate(db, next); }),
            "store: " + path() + ": no such table: no_such_table");
  EXPECT_EQ(db.query_int("PRAGMA user_version"), schema_version());
  EXPECT_EQ(db.query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'extras'"), 0);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM metrics"), 2);
}

TEST_F(SchemaTest, RefusesAStoreFromANewerKiln) {
  make_store(path());
  {
    Database db(path(), Access::ReadWrite);
    db.exec("PRAGMA user_version = " + std::to_string(schema_version() + 1));
  }
  const std::string expected = "store: " + path() + " has schema version " + std::to_string(schema_version() + 1) +
                               ", newer than this kiln's " + std::to_string(schema_version()) + "; upgrade kiln";
  EXPECT_EQ(error_of([&] { open_store(path(), Access::ReadWrite); }), expected);
  EXPECT_EQ(error_of([&] { open_store(path(), Access::ReadOnly); }), expected);
  EXPECT_EQ(error_of([&] { RunWriter writer(path()); }), expected);
  Database db(path(), Access::ReadOnly);
  EXPECT_EQ(db.query_int("PRAGMA user_version"), schema_version() + 1);  // untouched
}

TEST_F(SchemaTest, ReadOnlyAccessNeverMigrates) {
  Database(path(), Access::ReadWrite).exec("PRAGMA user_version = 0");
  EXPECT_EQ(error_of([&] { open_store(path(), Access::ReadOnly); }),
            "store: " + path() + " holds no kiln runs yet (an empty store)");
  EXPECT_EQ(error_of([&] { open_store(path("missing.db"), Access::ReadOnly); }),
            "store: " + path("missing.db") + ": no such run store");
}

TEST_F(SchemaTest, ANonSqliteFileIsRefusedAndLeftAlone) {
  const std::string text = "step,loss\n1,2.5\n2,2.4\n" + std::string(4096, 'x');
  spit(path(), text);
  const std::string expected = "store: " + path() + " is not a kiln run store (file is not a database)";
  EXPECT_EQ(error_of([&] { open_store(path(), Access::ReadWrite); }), expected);
  EXPECT_EQ(error_of([&] { open_store(path(), Access::ReadOnly); }), expected);
  EXPECT_EQ(slurp(path()), text);
}

TEST_F(SchemaTest, AnotherProgramsDatabaseIsRefused) {
  Database(path(), Access::ReadWrite).exec("CREATE TABLE photos (id INTEGER, file TEXT)");
  EXPECT_EQ(error_of([&] { open_store(path(), Access::ReadWrite); }),
            "store: " + path() + " is not a kiln run store (it holds other tables: photos)");
  Database db(path(), Access::ReadOnly);
  EXPECT_EQ(db.query_int("PRAGMA user_version"), 0);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'runs'"), 0);
  EXPECT_EQ(db.query_text("PRAGMA journal_mode"), "delete") << "its journal mode is its own";
}

TEST_F(SchemaTest, ADamagedFileGivesOneClearLine) {
  make_store(path());
  std::string bytes = slurp(path());
  ASSERT_GT(bytes.size(), 4096u);
  // Page 1 holds the schema table; scribble over it after the 100-byte file header.
  for (size_t i = 100; i < 4096; ++i) bytes[i] = static_cast<char>(0xA5 ^ (i * 31));
  spit(path(), bytes);
  const std::string message = error_of([&] { open_store(path(), Access::ReadOnly); });
  EXPECT_EQ(message.rfind("store: " + path() + " is damaged (", 0), 0u) << message;
  EXPECT_NE(message.find("restore it from a copy"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_EQ(error_of([&] { open_store(path(), Access::ReadWrite); }).rfind("store: " + path() + " is damaged (", 0), 0u);
  EXPECT_EQ(slurp(path()), bytes);  // refusing it wrote nothing
}

TEST_F(SchemaTest, AReadOnlyFileRefusesWritesAndServesQueries) {
  make_store(path());
  const std::string before = slurp(path());
  fs::permissions(path(), fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  // The folder is not writable either, so not even a -shm file can be made next to it.
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  const std::string report = as_unprivileged([&] {
    std::string out = error_of([&] { open_store(path(), Access::ReadWrite); }) + "\n";
    out += error_of([&] { RunWriter writer(path()); }) + "\n";
    auto db = open_store(path(), Access::ReadOnly);
    const auto runs = list_runs(*db);
    out += std::to_string(runs.size()) + " " + (runs.empty() ? "" : runs[0].name) + " " +
           std::string(runs.empty() ? "" : to_string(runs[0].status)) + "\n";
    const std::string write = error_of([&] { add_tags(*db, runs.at(0).id, {"x"}); });
    out += write.rfind("store: " + path() + " is read-only (", 0) == 0 ? "write refused" : write;
    return out;
  });
  const std::string refused = "store: " + path() +
                              " is read-only (no write permission); open it read-only to query "
                              "it, or choose another store file";
  EXPECT_EQ(report, refused + "\n" + refused + "\n1 first completed\nwrite refused");
  EXPECT_EQ(slurp(path()), before);
}

TEST_F(SchemaTest, AFullDiskFailsTheTransactionAndKeepsTheFile) {
  make_store(path());
  {
    auto db = open_store(path(), Access::ReadWrite);
    const int64_t pages = db->query_int("PRAGMA page_count");
    db->exec("PRAGMA max_page_count = " + std::to_string(pages + 2));
    const std::string message = error_of([&] {
      Transaction tx(*db);
      Statement st(*db, "INSERT INTO events (run_id, time, kind, message) VALUES (1, 0, 'x', ?)");
      for (int i = 0; i < 1000; ++i) st.bind(1, std::string(1000, 'e')).run(), st.reset();
      tx.commit();
    });
    EXPECT_EQ(message, "store: " + path() +
                           ": disk full (database or disk is full); free space and retry");
  }
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_EQ(db->query_text("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM events WHERE kind = 'x'"), 0);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics"), 2);
}

}  // namespace
}  // namespace kiln::store
