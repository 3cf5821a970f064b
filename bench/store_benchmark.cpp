// The run store's speed (docs/store.md, Benchmarks): how fast metric rows go in through the
// trainer's path, and how fast a chart's series comes out of a long run.
//
//   build/kiln_bench_store [--benchmark_filter=REGEX]
//
// Files go in $TMPDIR (default /tmp). Targets: >= 100,000 metric rows/s inserted; one
// metric of a 1,000,000-row run downsampled to 1000 points in < 100 ms.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "store/metric_blocks.h"
#include "store/metric_fields.h"
#include "store/metric_queries.h"
#include "store/metric_spread.h"
#include "store/metric_superblocks.h"
#include "store/rows.h"
#include "store/run_writer.h"
#include "store/schema.h"

namespace {

namespace fs = std::filesystem;
using namespace kiln::store;

std::string temp_path(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return (fs::path(tmp && *tmp ? tmp : "/tmp") /
          ("kiln_bench_store_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void remove_store(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

// A row as the trainer fills it: every column measured.
MetricRow full_row(int64_t step, int rank) {
  MetricRow m;
  m.step = step;
  m.rank = rank;
  m.time = 1.7e9 + 0.1 * static_cast<double>(step);
  m.tokens = step * 524288;
  m.loss = 2.0 + 8.0 / (1.0 + 0.001 * static_cast<double>(step)) + 0.01 * ((step * 7 + rank) % 13);
  m.lr = 3e-4;
  m.grad_norm = 0.8;
  m.tokens_per_s = 1.2e6;
  m.tflops = 410.0;
  m.mfu = 0.41;
  m.fwd_ms = 120.5;
  m.bwd_ms = 240.25;
  m.opt_ms = 12.0;
  m.comm_ms = 8.5;
  m.data_ms = 0.3;
  m.mem_used = int64_t{60} << 30;
  m.mem_peak = int64_t{70} << 30;
  m.loss_scale = 65536.0;
  m.skipped_steps = 0;
  return m;
}

// One log interval: every rank's row of `step`.
std::vector<MetricRow> interval_rows(int64_t step, int ranks) {
  std::vector<MetricRow> rows;
  rows.reserve(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) rows.push_back(full_row(step, r));
  return rows;
}

// The run every writer benchmark logs into.
void create_bench_run(RunWriter& writer) {
  RunInfo info;
  info.name = "bench";
  writer.create_run(info);
}

// The trainer's path: RunWriter::log_metrics with one log interval (every rank's row for
// one step) per call, committed by the writer thread; flush() at the end of each iteration
// so the figure is rows on disk per second, not rows queued. About 16,000 rows an iteration
// (2000 intervals of 8 ranks, 4 of 4096); `bytes_per_row`: the store's size on disk when the
// writer has closed, over the rows in it.
void BM_WriterInsert(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const int intervals = std::max(4, 16000 / ranks);
  const std::string path = temp_path("insert.db");
  remove_store(path);
  {
    WriterOptions options;
    options.max_queued_rows = size_t{1} << 22;  // measure the disk, not the thinning
    RunWriter writer(path, options);
    create_bench_run(writer);
    int64_t step = 0;
    for (auto _ : state) {
      for (int i = 0; i < intervals; ++i, ++step) writer.log_metrics(interval_rows(step, ranks));
      writer.flush();
    }
    const WriterStats stats = writer.stats();
    state.counters["transactions"] = static_cast<double>(stats.committed_transactions);
    state.counters["dropped"] = static_cast<double>(stats.dropped_rows);
  }
  const int64_t rows = state.iterations() * intervals * ranks;
  uintmax_t bytes = 0;
  for (const char* suffix : {"", "-wal"})
    if (fs::exists(path + suffix)) bytes += fs::file_size(path + suffix);
  state.counters["bytes_per_row"] = static_cast<double>(bytes) / static_cast<double>(rows);
  state.SetItemsProcessed(rows);
  remove_store(path);
}
BENCHMARK(BM_WriterInsert)->Arg(8)->Arg(64)->Arg(1024)->Arg(4096)->ArgName("ranks")->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A trainer slower than the writer: each log interval committed alone (flush() after each),
// the cost of one commit. Above 8 ranks a step is wide (store/metric_spread.h), and each
// commit also reads and writes its step's spread row and its 64-step spread block, and prunes
// the rows that left the recent window; 8 ranks write none of that, so 8 against 9 and 16
// shows the spread's share of a commit.
void BM_WriterCommitPerInterval(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const std::string path = temp_path("commit.db");
  remove_store(path);
  {
    RunWriter writer(path);
    create_bench_run(writer);
    int64_t step = 0;
    for (auto _ : state) {
      writer.log_metrics(interval_rows(step++, ranks));
      writer.flush();
    }
  }
  state.SetItemsProcessed(state.iterations());
  remove_store(path);
}
BENCHMARK(BM_WriterCommitPerInterval)->Arg(8)->Arg(9)->Arg(16)->ArgName("ranks")->Unit(benchmark::kMicrosecond)
    ->UseRealTime()->MinTime(3);

// A resumed run logging again the steps since its checkpoint, each interval committed alone:
// a commit that replaces a step's rows recomputes its block from the block's rows (64 a rank)
// and its superblock from its blocks (up to 64 a rank), where an appending commit
// (BM_WriterCommitPerInterval) merges. The steps of a whole superblock are logged again, in
// turn; 8 ranks, a narrow run, so that no pruning of old rows mixes in.
void BM_WriterRelogCommit(benchmark::State& state) {
  constexpr int kRanks = 8;
  constexpr int64_t kSuperblockSteps = 64 * 64;
  const std::string path = temp_path("relog.db");
  remove_store(path);
  {
    RunWriter writer(path);
    create_bench_run(writer);
    for (int64_t step = 0; step < 2 * kSuperblockSteps; ++step) writer.log_metrics(interval_rows(step, kRanks));
    writer.flush();
    int64_t step = kSuperblockSteps;
    for (auto _ : state) {
      writer.log_metrics(interval_rows(step, kRanks));
      writer.flush();
      step = step + 1 < 2 * kSuperblockSteps ? step + 1 : kSuperblockSteps;
    }
  }
  state.SetItemsProcessed(state.iterations());
  remove_store(path);
}
BENCHMARK(BM_WriterRelogCommit)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(3);

// SQLite's own ceiling for our rows: one transaction of 10,000 inserts, no thread.
void BM_RawInsert(benchmark::State& state) {
  constexpr int kRows = 10000;
  const std::string path = temp_path("raw.db");
  remove_store(path);
  {
    auto db = open_store(path, Access::ReadWrite);
    db->exec("INSERT INTO runs (name, created_at) VALUES ('raw', 0)");
    const int64_t run = db->last_insert_rowid();
    int64_t step = 0;
    for (auto _ : state) {
      Transaction tx(*db);
      for (int i = 0; i < kRows; ++i, ++step) insert_metric(*db, run, full_row(step / 8, static_cast<int>(step % 8)));
      tx.commit();
    }
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  remove_store(path);
}
BENCHMARK(BM_RawInsert)->Unit(benchmark::kMillisecond);

// A store file of the benchmarks': built by the derived fixture through `writer`, then read
// through `db`, and removed with it.
struct BenchStore {
  std::string path;
  std::unique_ptr<Database> db;

  explicit BenchStore(const std::string& name) : path(temp_path(name)) { remove_store(path); }
  ~BenchStore() {
    db.reset();
    remove_store(path);
  }
  std::unique_ptr<Database> writer() const { return open_store(path, Access::ReadWrite); }
  void written() { db = open_store(path, Access::ReadOnly); }
};

// A store with two runs of 1,000,000 metric rows each: one rank x 1,000,000 steps, and
// 8 ranks x 125,000 steps, with their metric blocks as the writer keeps them. Built once per
// process.
struct QueryStore : BenchStore {
  int64_t one_rank = 0, eight_ranks = 0;

  QueryStore() : BenchStore("query.db") {
    auto w = writer();
    one_rank = fill(*w, "one-rank", 1, 1000000);
    eight_ranks = fill(*w, "eight-ranks", 8, 125000);
    w.reset();
    written();
  }
  static int64_t fill(Database& db, const char* name, int ranks, int64_t steps) {
    Statement st(db, "INSERT INTO runs (name, created_at) VALUES (?, 0)");
    st.bind(1, name).run();
    const int64_t run = db.last_insert_rowid();
    for (int64_t s0 = 0; s0 < steps; s0 += 10000) {
      Transaction tx(db);
      BlockUpdate blocks;
      for (int64_t s = s0; s < std::min(steps, s0 + 10000); ++s) {
        std::vector<MetricRow> rows;
        for (int r = 0; r < ranks; ++r) rows.push_back(full_row(s, r));
        for (const auto& row : rows) insert_metric(db, run, row);
        blocks.add(rows);
      }
      blocks.write(db, run);
      tx.commit();
    }
    return run;
  }
};

QueryStore& query_store() {
  static QueryStore store;
  return store;
}

void run_series(benchmark::State& state, bool eight, std::vector<int> ranks, size_t points,
                int64_t first_step = std::numeric_limits<int64_t>::min(),
                int64_t last_step = std::numeric_limits<int64_t>::max()) {
  QueryStore& q = query_store();
  const int64_t run = eight ? q.eight_ranks : q.one_rank;
  SeriesQuery query;
  query.key = "loss";
  query.ranks = std::move(ranks);
  query.max_points = points;
  query.first_step = first_step;
  query.last_step = last_step;
  size_t returned = 0;
  for (auto _ : state) {
    const auto series = metric_series(*q.db, run, query);
    returned = 0;
    for (const auto& s : series) returned += s.points.size();
    benchmark::DoNotOptimize(returned);
  }
  state.counters["points"] = static_cast<double>(returned);
  // Rows the chart covers (not rows read: a downsampled chart reads blocks).
  const int64_t steps = eight ? 125000 : 1000000;
  const int64_t ranks_covered = query.ranks.empty() ? (eight ? 8 : 1)
                                                     : static_cast<int64_t>(query.ranks.size());
  const int64_t covered =
      (std::min(last_step, steps - 1) - std::max<int64_t>(first_step, 0) + 1) * ranks_covered;
  state.SetItemsProcessed(state.iterations() * covered);
}

void BM_Series_1Rank1MSteps_1000Points(benchmark::State& state) {
  run_series(state, false, {}, 1000);
}
void BM_Series_8Ranks125kSteps_AllRanks_1000Points(benchmark::State& state) {
  run_series(state, true, {}, 1000);
}
void BM_Series_8Ranks125kSteps_Rank0_1000Points(benchmark::State& state) {
  run_series(state, true, {0}, 1000);
}
// A zoomed chart: a step range whose ends cut blocks (read from their rows).
void BM_Series_1Rank1MSteps_Range800k_1000Points(benchmark::State& state) {
  run_series(state, false, {}, 1000, 100001, 899999);
}
void BM_Series_1Rank1MSteps_AllPoints(benchmark::State& state) {
  run_series(state, false, {}, 0);
}
BENCHMARK(BM_Series_1Rank1MSteps_1000Points)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Series_8Ranks125kSteps_AllRanks_1000Points)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Series_8Ranks125kSteps_Rank0_1000Points)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Series_1Rank1MSteps_Range800k_1000Points)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Series_1Rank1MSteps_AllPoints)->Unit(benchmark::kMillisecond);


// The two charts whose work grew with the run (bench/README.md, "Store and dashboard at
// scale"), asked as the dashboard's server asks them (monitor/server/api_read.cpp's
// arithmetic over kMaxAnswerPoints and kMaxAnswerRows, 2^18 each). Each store is built
// once per process, only when its benchmark runs.
constexpr size_t kAnswerBound = size_t{1} << 18;

// A run of 1,024 ranks x 100,000 steps as the writer leaves it: every rank's blocks, rank
// 0's rows, every rank's rows of the newest 1,000 steps only (older ones were pruned), and a
// spread row a step (bare: only what says the run is wide). The blocks come from the rows
// through BlockUpdate without inserting the pruned rows, which the writer deleted anyway.
struct BulkStore : BenchStore {
  static constexpr int kRanks = 1024;
  static constexpr int64_t kSteps = 100000;

  BulkStore() : BenchStore("bulk.db") {
    auto w = writer();
    w->exec("INSERT INTO runs (name, created_at) VALUES ('bulk', 0)");
    for (int64_t s0 = 1; s0 <= kSteps; s0 += 6400) {
      Transaction tx(*w);
      BlockUpdate blocks;
      for (int64_t s = s0; s < std::min(kSteps + 1, s0 + 6400); ++s) {
        std::vector<MetricRow> rows;
        for (int r = 0; r < kRanks; ++r) rows.push_back(full_row(s, r));
        for (auto& row : rows) row.fwd_ms += 0.01 * static_cast<double>((s * 31 + row.rank * 17) % 97);
        for (const auto& row : rows)
          if (row.rank == 0 || s > kSteps - 1000) insert_metric(*w, 1, row);
        blocks.add(rows);
        w->cached("INSERT INTO metric_spread (run_id, step, time, ranks, top_rank) VALUES (1, ?, 0, ?, ?)")
            .bind_all(s, kRanks, kRanks - 1)
            .run();
      }
      blocks.write(*w, 1);
      tx.commit();
    }
    w.reset();
    written();
  }
};

// A narrow run (8 ranks keep every row) of 1,000,000 steps, written as QueryStore's runs.
struct LongNarrowStore : BenchStore {
  int64_t run = 0;

  LongNarrowStore() : BenchStore("narrow.db") {
    run = QueryStore::fill(*writer(), "narrow", 8, 1000000);
    written();
  }
};

LongNarrowStore& long_narrow_store() {
  static LongNarrowStore store;
  return store;
}

// bench/store-scale.sh's bulk answer: one key of 1,024 ranks over the whole run, as
// /api/runs/1/metrics?keys=fwd_ms&ranks=0,...,1023 asks it, each series getting
// 2^18 / 1024 = 256 points of the points asked for, the answer 2^18 rows.
void BM_Bulk_1024Ranks100kSteps(benchmark::State& state) {
  static BulkStore store;
  SeriesQuery query;
  query.key = "fwd_ms";
  for (int r = 0; r < BulkStore::kRanks; ++r) query.ranks.push_back(r);
  query.max_points = std::min<size_t>(static_cast<size_t>(state.range(0)), kAnswerBound / BulkStore::kRanks);
  query.max_rows = kAnswerBound;
  size_t points = 0;
  for (auto _ : state) {
    points = 0;
    for (const auto& s : metric_series(*store.db, 1, query)) points += s.points.size();
    benchmark::DoNotOptimize(points);
  }
  state.counters["points"] = static_cast<double>(points);
}
BENCHMARK(BM_Bulk_1024Ranks100kSteps)->Arg(2000)->ArgName("points")->Unit(benchmark::kMillisecond)->UseRealTime();

// The run page of the narrow run: its charts' keys and the time split's, with tokens, at
// 2,000 points (the page's) for every rank, the server's bound of 2^18 rows split over the
// keys, one call of metric_series per key.
void BM_RunPage_8Ranks1MSteps(benchmark::State& state) {
  LongNarrowStore& store = long_narrow_store();
  const std::vector<std::string> keys = {"loss",   "lr",     "grad_norm", "tokens_per_s", "mfu",
                                         "mem_used", "fwd_ms", "bwd_ms",  "opt_ms",       "comm_ms",
                                         "data_ms", "a2a_ms", "shard_ms", "pipe_ms",     "tokens"};
  SeriesQuery query;
  query.max_points = std::min<size_t>(2000, kAnswerBound / (keys.size() * 8));
  query.max_rows = kAnswerBound / keys.size();
  size_t points = 0;
  for (auto _ : state) {
    points = 0;
    for (const auto& key : keys) {
      query.key = key;
      for (const auto& s : metric_series(*store.db, store.run, query)) points += s.points.size();
    }
    benchmark::DoNotOptimize(points);
  }
  state.counters["points"] = static_cast<double>(points);
}
BENCHMARK(BM_RunPage_8Ranks1MSteps)->Unit(benchmark::kMillisecond)->UseRealTime();

// Migration 20's work on the narrow run: its 125,000 blocks rolled up into superblocks again,
// in a transaction rolled back each time.
void BM_BuildSuperblocks_8Ranks1MSteps(benchmark::State& state) {
  LongNarrowStore& store = long_narrow_store();
  Database db(store.path, Access::ReadWrite);
  for (auto _ : state) {
    Transaction tx(db);
    db.exec("DELETE FROM metric_superblocks");
    build_superblocks(db);
  }
  state.counters["superblocks"] = static_cast<double>(db.query_int("SELECT count(*) FROM metric_superblocks"));
}
BENCHMARK(BM_BuildSuperblocks_8Ranks1MSteps)->Unit(benchmark::kMillisecond)->UseRealTime();

// A wide run (16 ranks) of 1,000,000 steps as the writer leaves it: blocks and superblocks,
// the spread a step and its blocks, and every rank's rows of the newest 1,000 steps only.
struct LongWideStore : BenchStore {
  LongWideStore() : BenchStore("wide.db") {
    auto w = writer();
    w->exec("INSERT INTO runs (name, created_at) VALUES ('wide', 0)");
    for (int64_t s0 = 0; s0 < 1000000; s0 += 5000) {
      Transaction tx(*w);
      BlockUpdate blocks;
      SpreadUpdate spread;
      for (int64_t s = s0; s < s0 + 5000; ++s) {
        std::vector<MetricRow> rows;
        for (int r = 0; r < 16; ++r) rows.push_back(full_row(s, r));
        for (const auto& row : rows) insert_metric(*w, 1, row);
        blocks.add(rows);
        spread.add(rows);
      }
      blocks.write(*w, 1);
      spread.write(*w, 1);
      tx.commit();
    }
    w.reset();
    written();
  }
};

// The run page of the wide run: each key's rank 0 series and each per-rank key's spread
// across ranks, at 2,000 points, the server's 2^18 rows split over the keys' two series.
// Apart, to tell the rollup of the rows from the spread's.
void wide_run_page(benchmark::State& state, bool spread) {
  static LongWideStore store;
  const std::vector<std::string> keys = {"loss",   "lr",     "grad_norm", "tokens_per_s", "mfu",
                                         "mem_used", "fwd_ms", "bwd_ms",  "opt_ms",       "comm_ms",
                                         "data_ms", "a2a_ms", "shard_ms", "pipe_ms",     "tokens"};
  SeriesQuery query;
  query.ranks = {0};
  query.max_points = 2000;
  query.max_rows = kAnswerBound / (keys.size() * 2);
  size_t points = 0;
  for (auto _ : state) {
    points = 0;
    for (const auto& key : keys) {
      query.key = key;
      const MetricField* field = find_metric_field(key);
      if (!spread)
        for (const auto& s : metric_series(*store.db, 1, query)) points += s.points.size();
      else if (field->spread == RankSpread::PerRank && !is_row_key(*field))
        points += spread_series(*store.db, 1, key, query.first_step, query.last_step, query.max_points,
                                query.max_rows)
                      .size();
    }
    benchmark::DoNotOptimize(points);
  }
  state.counters["points"] = static_cast<double>(points);
}
void BM_WideRunPage_16Ranks1MSteps_Rank0(benchmark::State& state) { wide_run_page(state, false); }
void BM_WideRunPage_16Ranks1MSteps_Spread(benchmark::State& state) { wide_run_page(state, true); }
BENCHMARK(BM_WideRunPage_16Ranks1MSteps_Rank0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_WideRunPage_16Ranks1MSteps_Spread)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
