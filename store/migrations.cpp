// The schema, one migration per version. Never edit a migration that has shipped: add the
// next one. A version's new metric columns are not written here but declared in the metric
// list (store/metric_fields.h), which migrate() adds after the version's SQL. The comments inside CREATE statements are kept in the file, so `.schema` in the
// sqlite3 shell shows them. Times are Unix seconds (REAL); docs/store.md has every column.
#include <iterator>

#include "store/metric_spread.h"
#include "store/metric_superblocks.h"
#include "store/schema.h"
#include "store/spread_blocks.h"

namespace kiln::store {
namespace {

// Version 0 -> 1: the first schema.
constexpr const char* kV1 = R"sql(
CREATE TABLE runs (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL UNIQUE,
  status       TEXT NOT NULL DEFAULT 'created' CHECK (status IN
                 ('created', 'running', 'paused', 'completed', 'stopped', 'failed', 'lost')),
  config_json  TEXT NOT NULL DEFAULT '{}',   -- the resolved run config
  layout       TEXT NOT NULL DEFAULT '',     -- parallel layout, e.g. tp2.pp1.dp4
  backend      TEXT NOT NULL DEFAULT '',     -- cpu | cuda
  device       TEXT NOT NULL DEFAULT '',
  host         TEXT NOT NULL DEFAULT '',
  command_line TEXT NOT NULL DEFAULT '',
  created_at   REAL NOT NULL,
  started_at   REAL,
  ended_at     REAL,
  heartbeat_at REAL,                         -- last sign of life of the training process
  tags         TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags)),  -- JSON array of text
  notes        TEXT NOT NULL DEFAULT '',
  error        TEXT                          -- why a failed run failed
);

-- One row per rank per logged step. Times in ms, memory in bytes, NULL = not measured.
CREATE TABLE metrics (
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step          INTEGER NOT NULL,
  rank          INTEGER NOT NULL,
  time          REAL NOT NULL,
  tokens        INTEGER,   -- tokens consumed by the whole run up to this step
  loss          REAL,
  lr            REAL,
  grad_norm     REAL,
  tokens_per_s  REAL,      -- whole-run throughput as this rank measured it
  tflops        REAL,      -- model TFLOP/s of this rank's device
  mfu           REAL,      -- model FLOPs utilisation, 0..1
  fwd_ms        REAL,
  bwd_ms        REAL,
  opt_ms        REAL,
  comm_ms       REAL,      -- exposed communication
  data_ms       REAL,      -- waiting for data
  mem_used      INTEGER,
  mem_peak      INTEGER,
  loss_scale    REAL,
  skipped_steps INTEGER,
  PRIMARY KEY (run_id, step, rank)
) WITHOUT ROWID;

-- The metrics rolled up per rank and block of 64 steps (block = floor(step / 64)), written
-- with the rows in the same transaction, so a long run's chart reads blocks, not rows.
CREATE TABLE metric_blocks (
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank       INTEGER NOT NULL,
  block      INTEGER NOT NULL,
  aggregates BLOB NOT NULL,  -- per metric key, 40 bytes little-endian: min, max, last (f64),
                             -- last step (i64), its time (f64); NaN min: no value in the block
  PRIMARY KEY (run_id, rank, block)
) WITHOUT ROWID;

CREATE TABLE valid_metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step   INTEGER NOT NULL,
  time   REAL NOT NULL,
  loss   REAL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE system_metrics (
  run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank         INTEGER NOT NULL,
  time         REAL NOT NULL,
  gpu_util     REAL,     -- percent
  gpu_mem_used INTEGER,  -- bytes
  gpu_power_w  REAL,
  gpu_temp_c   REAL,
  cpu_percent  REAL,     -- of one core
  rss_bytes    INTEGER,
  PRIMARY KEY (run_id, rank, time)
) WITHOUT ROWID;

CREATE TABLE events (
  id      INTEGER PRIMARY KEY,
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time    REAL NOT NULL,
  step    INTEGER,
  kind    TEXT NOT NULL,  -- start | end | status | checkpoint | command | nan | error | dropped
  message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_by_run ON events (run_id, id);

CREATE TABLE checkpoints (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step   INTEGER NOT NULL,
  path   TEXT NOT NULL,
  bytes  INTEGER,
  layout TEXT NOT NULL DEFAULT '',
  time   REAL NOT NULL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE commands (
  id           INTEGER PRIMARY KEY,
  run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  created_at   REAL NOT NULL,
  action       TEXT NOT NULL CHECK (action IN ('pause', 'resume', 'stop', 'checkpoint', 'set')),
  argument     TEXT NOT NULL DEFAULT '',  -- set: key=value
  status       TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'rejected')),
  applied_step INTEGER,
  applied_at   REAL,
  reason       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX commands_by_run ON commands (run_id, status, id);
)sql";

// Version 1 -> 2: the recording process's id, so a resume on the same host can tell a dead
// run from a live one at once; and the secrets that command lines recorded before this
// version may hold (`--token T`) replaced by *** (the function is kiln's, registered on the
// connection that migrates: user_text.h).
constexpr const char* kV2 = R"sql(
ALTER TABLE runs ADD COLUMN pid INTEGER;  -- the recording process on `host`; NULL once ended
UPDATE runs SET command_line = kiln_redact_command_line(command_line);
)sql";

// Version 2 -> 3: the machine's memory beside the process's in each system reading, and the
// text the model generates at each validation step.
constexpr const char* kV3 = R"sql(
ALTER TABLE system_metrics ADD COLUMN host_mem_used INTEGER;   -- bytes: MemTotal - MemAvailable
ALTER TABLE system_metrics ADD COLUMN host_mem_total INTEGER;  -- bytes: MemTotal

CREATE TABLE samples (
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step        INTEGER NOT NULL,
  time        REAL NOT NULL,
  prompt      TEXT NOT NULL DEFAULT '',  -- train.sample_prompt
  text        TEXT NOT NULL DEFAULT '',  -- what the model wrote after it
  temperature REAL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
)sql";

// Version 3 -> 4: the routing of each mixture-of-experts layer at each logged step
// (RunWriter::log_expert_loads). The key leads with the layer because the dashboard reads one
// layer's heatmap over a step range, a walk of the key (and, downsampled, one seek per
// evenly spaced step); the index by step serves the live stream (rows after a step), the
// latest step and the export, in step order. The per-expert counts are blobs: they are only
// ever read whole, so 8 bytes an expert and a copy to decode beat JSON text and its parser;
// what SQL needs to rank or plot a layer (imbalance, aux_loss, router_entropy) is in columns.
constexpr const char* kV4 = R"sql(
CREATE TABLE expert_loads (
  run_id         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  layer          INTEGER NOT NULL,  -- the model's layer index, 0-based
  step           INTEGER NOT NULL,
  tokens         BLOB NOT NULL CHECK (length(tokens) > 0 AND length(tokens) % 8 = 0),
                                    -- token assignments per expert (top_k per token), summed
                                    -- over the step's micro-batches and data-parallel ranks:
                                    -- one little-endian i64 per expert
  dropped        BLOB,              -- the assignments the capacity limit dropped, per expert as
                                    -- tokens; NULL: none dropped
  aux_loss       REAL,              -- the load-balancing auxiliary loss
  router_entropy REAL,              -- the router's mean entropy over the tokens, nats
  imbalance      REAL,              -- max / mean of tokens; NULL when no token was routed
  PRIMARY KEY (run_id, layer, step)
) WITHOUT ROWID;
CREATE INDEX expert_loads_by_step ON expert_loads (run_id, step);
)sql";

// Version 4 -> 5: expert parallelism's all-to-all time in each metric row (a2a_ms), and its
// key in every metric block. Metric columns come from the one metric list
// (store/metric_fields.h, `since` 5): migrate() adds the column and appends to every block
// written before an aggregate that says "no value", the same two statements this version
// always ran, so a file migrated before or after the list was written is the same file.
constexpr const char* kV5 = "";

// Version 5 -> 6: the run's plan beside what it measures: the planner's step time for its
// layout on its device and rank 0's planned memory (kiln plan, docs/planner.md); NULL for a
// run recorded before, or on a device the planner does not know.
constexpr const char* kV6 = R"sql(
ALTER TABLE runs ADD COLUMN planned_step_s REAL;          -- predicted seconds a step
ALTER TABLE runs ADD COLUMN planned_memory_bytes INTEGER;  -- rank 0's planned bytes
)sql";


// Version 6 -> 7: the workstation's second part (docs/alerts.md, docs/sweeps.md, docs/runs.md).
// A run may be `released` (checkpointed and ended to free its devices, to be resumed) and a
// `release` command asks for that; SQLite cannot loosen a CHECK in place, so `runs` and
// `commands` are rebuilt (migrate() turns foreign keys off for the rebuild and checks them
// before it commits). A run records where and as how many processes it ran, so `kiln runs
// resume` can launch it again; the sweep and point that launched it; and, for a fork, its
// parent and the parent's step it started from. Alerts, and each rank's host, get tables.
constexpr const char* kV7 = R"sql(
CREATE TABLE sweeps (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL UNIQUE,
  created_at   REAL NOT NULL,
  spec_json    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(spec_json)),
                                           -- the base config, grid, sampling, parallelism, metric
  command_line TEXT NOT NULL DEFAULT '',   -- the kiln sweep command (secrets redacted)
  workdir      TEXT NOT NULL DEFAULT '',   -- the folder it ran in
  host         TEXT NOT NULL DEFAULT '',
  pid          INTEGER,                    -- the sweep's process while it launches points
  heartbeat_at REAL,
  ended_at     REAL
);

-- Every point of a sweep, written when the sweep starts; run_name is the run launched for it.
CREATE TABLE sweep_points (
  sweep_id    INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point       INTEGER NOT NULL,                              -- 0-based, in launch order
  params_json TEXT NOT NULL CHECK (json_valid(params_json)),  -- {"train.lr": 0.001, ...}
  run_name    TEXT,                                           -- NULL: not launched yet
  PRIMARY KEY (sweep_id, point)
) WITHOUT ROWID;

CREATE TABLE runs_v7 (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL UNIQUE,
  status       TEXT NOT NULL DEFAULT 'created' CHECK (status IN
                 ('created', 'running', 'paused', 'completed', 'stopped', 'failed', 'lost',
                  'released')),
  config_json  TEXT NOT NULL DEFAULT '{}',   -- the resolved run config
  layout       TEXT NOT NULL DEFAULT '',     -- parallel layout, e.g. tp2.pp1.dp4
  backend      TEXT NOT NULL DEFAULT '',     -- cpu | cuda
  device       TEXT NOT NULL DEFAULT '',
  host         TEXT NOT NULL DEFAULT '',
  command_line TEXT NOT NULL DEFAULT '',
  created_at   REAL NOT NULL,
  started_at   REAL,
  ended_at     REAL,
  heartbeat_at REAL,                         -- last sign of life of the training process
  tags         TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags)),  -- JSON array of text
  notes        TEXT NOT NULL DEFAULT '',
  error        TEXT,                         -- why a failed run failed
  pid          INTEGER,                      -- the recording process on `host`; NULL once ended
  planned_step_s REAL,                       -- predicted seconds a step
  planned_memory_bytes INTEGER,              -- rank 0's planned bytes
  workdir      TEXT NOT NULL DEFAULT '',     -- the folder the command ran in
  world_size   INTEGER,                      -- how many processes (ranks) it ran as
  sweep_id     INTEGER REFERENCES sweeps(id) ON DELETE SET NULL,
  sweep_point  INTEGER,                      -- its point in that sweep
  parent_id    INTEGER REFERENCES runs(id) ON DELETE SET NULL,  -- a fork's parent run
  parent_step  INTEGER                       -- the parent's checkpoint step it started from
);
INSERT INTO runs_v7 (id, name, status, config_json, layout, backend, device, host, command_line,
                     created_at, started_at, ended_at, heartbeat_at, tags, notes, error, pid,
                     planned_step_s, planned_memory_bytes)
  SELECT id, name, status, config_json, layout, backend, device, host, command_line,
         created_at, started_at, ended_at, heartbeat_at, tags, notes, error, pid,
         planned_step_s, planned_memory_bytes FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v7 RENAME TO runs;
CREATE INDEX runs_by_sweep ON runs (sweep_id) WHERE sweep_id IS NOT NULL;
CREATE INDEX runs_by_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE commands_v7 (
  id           INTEGER PRIMARY KEY,
  run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  created_at   REAL NOT NULL,
  action       TEXT NOT NULL CHECK (action IN
                 ('pause', 'resume', 'stop', 'checkpoint', 'set', 'release')),
  argument     TEXT NOT NULL DEFAULT '',  -- set: key=value
  status       TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'rejected')),
  applied_step INTEGER,
  applied_at   REAL,
  reason       TEXT NOT NULL DEFAULT ''
);
INSERT INTO commands_v7 SELECT * FROM commands;
DROP TABLE commands;
ALTER TABLE commands_v7 RENAME TO commands;
CREATE INDEX commands_by_run ON commands (run_id, status, id);

-- Each alert a run's rules fired (docs/alerts.md), with an `alert` event beside it.
CREATE TABLE alerts (
  id        INTEGER PRIMARY KEY,
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time      REAL NOT NULL,
  step      INTEGER,
  rule      TEXT NOT NULL,  -- nan | loss_spike | grad_spike | throughput | straggler | stall | memory
  rank      INTEGER,        -- the rank it names; NULL: the whole run
  value     REAL,           -- what was measured
  threshold REAL,           -- the limit it crossed
  message   TEXT NOT NULL DEFAULT '',
  action    TEXT NOT NULL DEFAULT ''  -- what the run did about it: pause | checkpoint | stop | ''
);
CREATE INDEX alerts_by_run ON alerts (run_id, id);

-- Where each rank of a run ran, written once when it starts (and again when it resumes).
CREATE TABLE run_ranks (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank   INTEGER NOT NULL,
  host   TEXT NOT NULL DEFAULT '',
  device TEXT NOT NULL DEFAULT '',  -- cpu, or cuda:N on that host
  pid    INTEGER,
  PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;
)sql";

// Version 7 -> 8: how each run was launched beyond its config (store/run_launch.h), as data,
// so `kiln runs resume` and `kiln runs fork` start it again from fields they can check rather
// than from its command line's text. Runs recorded before read NULL and start again without a
// dashboard.
constexpr const char* kV8 = R"sql(
ALTER TABLE runs ADD COLUMN launch TEXT CHECK (launch IS NULL OR json_valid(launch));
  -- {"serve", "allow_hosts", "max_connections", "max_subscribers", "token"}: the dashboard it
  -- served (whether it had a token, never the token); {}: none; NULL: recorded before version 8
)sql";

// Version 8 -> 9: how a sweep ended (docs/sweeps.md), so a sweep stopped by a signal reads as
// interrupted rather than ended. A sweep recorded before reads as ended once it has an end.
constexpr const char* kV9 = R"sql(
ALTER TABLE sweeps ADD COLUMN status TEXT NOT NULL DEFAULT 'live'
  CHECK (status IN ('live', 'ended', 'interrupted'));
  -- live: its process launches points (interrupted if its heartbeat goes stale); ended: it
  -- launched every point and saw each end; interrupted: it stopped before that
UPDATE sweeps SET status = 'ended' WHERE ended_at IS NOT NULL;
)sql";

// Version 9 -> 10: the tokens each step trained on (metrics.trained_tokens): a fine-tune's loss
// mask leaves its prompts out, so they are fewer than the tokens it read. A metric column from
// the one metric list (`since` 10), which migrate() adds with its blocks' aggregate.
constexpr const char* kV10 = "";

// Version 10 -> 11: several prompts sampled at each validation step (train.sample_prompt as a
// list), so a step holds one sample per prompt, told apart by its place in the list. SQLite
// cannot change a primary key in place: the table is made again and the rows move over as
// slot 0, the one prompt every run before this version had.
constexpr const char* kV11 = R"sql(
CREATE TABLE samples_v11 (
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step        INTEGER NOT NULL,
  slot        INTEGER NOT NULL DEFAULT 0,  -- the prompt's place in train.sample_prompt
  time        REAL NOT NULL,
  prompt      TEXT NOT NULL DEFAULT '',    -- that prompt
  text        TEXT NOT NULL DEFAULT '',    -- what the model wrote after it
  temperature REAL,
  PRIMARY KEY (run_id, step, slot)
) WITHOUT ROWID;
INSERT INTO samples_v11 (run_id, step, slot, time, prompt, text, temperature)
  SELECT run_id, step, 0, time, prompt, text, temperature FROM samples;
DROP TABLE samples;
ALTER TABLE samples_v11 RENAME TO samples;
)sql";

// Version 11 -> 12: goodput (docs/resilience.md#goodput), the share of a run's wall-clock time
// spent on steps that survive. The seconds of those steps go on with the checkpoint a run
// resumes from, so steps a failure lost stop counting; the wall clock is each process's
// (attempt's) own, summed over the run's attempts, with the time between a failure and its
// automatic restart counted too. A checkpoint records how long the step stalled for it, which
// kiln plan --mtbf-hours weighs against the failure rate.
constexpr const char* kV12 = R"sql(
ALTER TABLE runs ADD COLUMN step_seconds REAL;
ALTER TABLE runs ADD COLUMN counted_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN attempt_started_at REAL;
ALTER TABLE checkpoints ADD COLUMN seconds REAL;
)sql";

// Version 12 -> 13: rewinds past a loss spike (docs/resilience.md#rewinding-past-a-loss-spike).
// A rewind replaces the steps it abandons: their rows go (metrics, validation, samples, expert
// loads, checkpoints) as the run trains those steps again, and rank 0's logged losses of them
// are kept here, one list per rewind, for the charts to draw dimmed.
constexpr const char* kV13 = R"sql(
CREATE TABLE rewinds (
  id                  INTEGER PRIMARY KEY,
  run_id              INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time                REAL NOT NULL,
  number              INTEGER NOT NULL,  -- 1 for the run's first rewind, 2 for its second, ...
  spike_step          INTEGER NOT NULL,  -- the step whose loss spiked
  from_step           INTEGER NOT NULL,  -- the last step trained before going back
  to_step             INTEGER NOT NULL,  -- the checkpoint's step it went back to
  checkpoint          TEXT NOT NULL DEFAULT '',  -- that checkpoint's folder
  first_skipped_batch INTEGER NOT NULL,  -- the first global batch of the data skipped (from 1)
  skipped_batches     INTEGER NOT NULL,  -- how many (alerts.rewind_skip)
  message             TEXT NOT NULL DEFAULT ''
);
CREATE INDEX rewinds_by_run ON rewinds (run_id, id);

-- Rank 0's logged loss at each step a rewind abandoned.
CREATE TABLE rewound_losses (
  rewind_id INTEGER NOT NULL REFERENCES rewinds(id) ON DELETE CASCADE,
  step      INTEGER NOT NULL,
  time      REAL NOT NULL,  -- when it was logged
  loss      REAL,
  PRIMARY KEY (rewind_id, step)
) WITHOUT ROWID;
)sql";

// Version 13 -> 14: sharded data parallelism's exposed gathers and reductions in each metric
// row (metrics.shard_ms, parallel.shard=gradients|parameters): a metric column from the one
// metric list (`since` 14), which migrate() adds with its blocks' aggregate.
constexpr const char* kV14 = "";

// Version 14 -> 15: the time a pipeline stage waited for its neighbours in each metric row
// (metrics.pipe_ms, parallel.pp > 1: the schedule's bubble as measured, with the transfers),
// a metric column from the one metric list (`since` 15).
constexpr const char* kV15 = "";

// Version 15 -> 16: multi-token prediction's loss at each depth in each metric row
// (metrics.mtp1_loss ... mtp4_loss, model.mtp_depth): metric columns from the one metric list
// (`since` 16).
constexpr const char* kV16 = "";

// Version 16 -> 17: issue 42's storage that scales. Each wide step (logged by more than 8
// ranks) gets one row of its spread across ranks: per PerRank field of the metric list its
// min, max, sum and count over the ranks and the ranks at the min and the max (columns
// <field>_min ... <field>_max_rank, added from the list after this SQL, six a field), so a
// chart of every rank reads one row a step. Then the rows of ranks other than 0 older than the
// newest 1,000 wide steps go (store/metric_spread.h): their blocks stay, and rank 0's rows.
// build_spreads computes the existing steps' spreads and prunes, after the columns exist.
constexpr const char* kV17 = R"sql(
CREATE TABLE metric_spread (
  run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step     INTEGER NOT NULL,
  time     REAL NOT NULL,     -- the latest of the step's rows' times
  ranks    INTEGER NOT NULL,  -- the rows counted (more than 8)
  top_rank INTEGER NOT NULL,  -- the highest rank counted: rows of higher ranks merge in
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
)sql";

// Version 17 -> 18: the spread rolled up per block of 64 steps (store/spread_blocks.h), so a
// chart of every rank of a long run reads a row a block instead of a row a step: per spread
// field the same six columns as metric_spread (added from the metric list after this SQL),
// over the block's wide steps and their ranks. build_spread_blocks computes the blocks of the
// spread rows already stored, after the columns exist.
constexpr const char* kV18 = R"sql(
CREATE TABLE spread_blocks (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  block  INTEGER NOT NULL,  -- floor(step / 64)
  step   INTEGER NOT NULL,  -- the block's last wide step
  time   REAL NOT NULL,     -- that step's time (the latest of its rows')
  ranks  INTEGER NOT NULL,  -- that step's rows counted
  PRIMARY KEY (run_id, block)
) WITHOUT ROWID;
)sql";

// Version 18 -> 19: metric_blocks becomes a rowid table, its key a unique index. A WITHOUT
// ROWID table keeps a row in its b-tree's cells, which hold about 1,000 bytes at most on a
// 4 KiB page before the rest goes to an overflow page; a block's aggregates grew to 1,000
// bytes with the metric list (25 keys x 40), so every block took a page of its own, 4 KiB
// for 1 KiB, 80% of a 1,024-rank run's store (bench/README.md, "Store and dashboard at
// scale"). A rowid table's cells hold a whole page, so four blocks share one. The rows are
// copied in (run, block, rank) order, as the writer appends them.
constexpr const char* kV19 = R"sql(
CREATE TABLE metric_blocks_v19 (
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank       INTEGER NOT NULL,
  block      INTEGER NOT NULL,
  aggregates BLOB NOT NULL,  -- per metric key, 40 bytes little-endian: min, max, last (f64),
                             -- last step (i64), its time (f64); NaN min: no value in the block
  UNIQUE (run_id, rank, block)
);
INSERT INTO metric_blocks_v19 (run_id, rank, block, aggregates)
  SELECT run_id, rank, block, aggregates FROM metric_blocks ORDER BY run_id, block, rank;
DROP TABLE metric_blocks;
ALTER TABLE metric_blocks_v19 RENAME TO metric_blocks;
)sql";

// Version 19 -> 20: the rollup's second level (store/metric_superblocks.h), per rank and
// superblock of 64 blocks (4,096 steps), so a chart of a very long run, or of many ranks,
// reads a row per 4,096 steps of a rank instead of 64 blocks: the bulk answer of 1,024 ranks
// over 100,000 steps read 1.6 million blocks. A rowid table, as metric_blocks since version
// 19, for its 1 KB rows. build_superblocks merges the stored blocks into it.
constexpr const char* kV20 = R"sql(
CREATE TABLE metric_superblocks (
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank       INTEGER NOT NULL,
  superblock INTEGER NOT NULL,  -- floor(block / 64), floor(step / 4096)
  aggregates BLOB NOT NULL,     -- metric_blocks' aggregates over the superblock's blocks
  UNIQUE (run_id, rank, superblock)
);
)sql";

constexpr Migration kMigrations[] = {{kV1},  {kV2},  {kV3},  {kV4},  {kV5},  {kV6},
                                     {kV7},  {kV8},  {kV9},  {kV10}, {kV11}, {kV12},
                                     {kV13}, {kV14}, {kV15}, {kV16}, {kV17, build_spreads},
                                     {kV18, build_spread_blocks}, {kV19}, {kV20, build_superblocks}};

}  // namespace

std::span<const Migration> migrations() { return kMigrations; }

int schema_version() { return static_cast<int>(std::size(kMigrations)); }

}  // namespace kiln::store
