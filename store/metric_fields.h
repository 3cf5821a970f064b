// The one list of per-rank step metrics: each field of MetricRow declared once, with its type,
// unit, how ranks differ in it, where its aggregate sits in a metric block, which schema
// version added its column, and where it is shown. The store's columns, its reading and
// writing of rows, the metric blocks, JSON, CSV, Prometheus, the trainer's gather across
// ranks and the views' columns and charts all walk this list (as the config's parsing walks
// config.cpp's field list), so a new metric touches its producer and this list:
//   1. a MetricRow member (store/types.h) and its entry at the end of kMetricFields;
//   2. `since` the next schema version, with a migration entry for that version
//      (store/migrations.cpp), for which migrate() adds the column and the blocks' aggregate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "store/types.h"

namespace kiln::store {

// Where a MetricRow keeps the field; its SQL type follows (INTEGER for the integer ones).
using MetricMember = std::variant<int64_t MetricRow::*, int MetricRow::*, double MetricRow::*,
                                  std::optional<int64_t> MetricRow::*>;

// How the ranks of one step differ in a field: the same on every rank (the step's loss,
// measured once and copied to each rank's row), or each rank's own measurement, which the
// trainer gathers from every rank to the first.
enum class RankSpread { SameOnEveryRank, PerRank };

// Which end of a per-rank field's spread across ranks is the slow rank, the one the others
// wait for (metric_spread.h): the highest time or memory, the lowest throughput.
enum class SlowEnd { High, Low };

// The views that show a field (a bit set).
enum MetricView : unsigned {
  kInRunChart = 1u << 0,       // a chart of its own on a run's page (the dashboard)
  kInCompareGrid = 1u << 1,    // a chart of the comparison page's grid
  kInCompareChoice = 1u << 2,  // a choice of the comparison page's chart of one more metric
  kInTimeSplit = 1u << 3,      // one of the parts the step's time splits into: the run page's
                               // split chart, the ranks tables of the dashboard and the TUI
  kInTimeWithin = 1u << 4,     // a part of other kInTimeSplit fields' time: drawn beside them
                               // in the split chart and the TUI's ranks table, where measured
  kInRanks = 1u << 5,          // in a run's ranks (GET /api/runs/{run}/ranks)
};

struct MetricField {
  std::string_view name;  // column, JSON key, CSV header, series key
  MetricMember member;
  std::string_view unit;  // "ms", "bytes", "tokens/s", ...; empty: a plain number
  RankSpread spread;
  // Its aggregate's index in a metric_blocks row (metric_blocks.h); -1: not rolled up (the
  // row's key, step and rank). Blocks on disk hold them in this order: it never changes.
  int block_slot;
  int since;  // the schema version whose migration added its column (1: the first schema)
  unsigned views;
  // In a table that drops columns when narrow (the TUI's ranks), higher stays longer.
  int column_priority;
  std::string_view title;        // a chart's title, for the fields with kInRunChart or kInCompareGrid
  std::string_view prometheus;   // its gauge on GET /metrics; empty: not exported
  std::string_view description;  // one line: the gauge's help text, and docs/store.md's
  SlowEnd slow = SlowEnd::High;  // for a PerRank field: which end of the spread is the slow rank
};

// Every field, in the order of the CSV export's columns and of the views.
inline constexpr MetricField kMetricFields[] = {
    {"step", &MetricRow::step, "", RankSpread::SameOnEveryRank, -1, 1, 0, 0, "", "", "The logged step."},
    {"rank", &MetricRow::rank, "", RankSpread::PerRank, -1, 1, 0, 0, "", "", "The rank that measured the row."},
    {"time", &MetricRow::time, "s", RankSpread::SameOnEveryRank, 16, 1, 0, 0, "", "",
     "Unix seconds when the row was logged."},
    {"tokens", &MetricRow::tokens, "tokens", RankSpread::SameOnEveryRank, 15, 1, 0, 0, "", "",
     "Tokens consumed by the whole run up to this step."},
    {"loss", &MetricRow::loss, "", RankSpread::SameOnEveryRank, 0, 1, kInRunChart | kInCompareGrid, 0, "Loss",
     "kiln_loss", "Training loss at the latest logged step."},
    {"lr", &MetricRow::lr, "", RankSpread::SameOnEveryRank, 1, 1, kInRunChart | kInCompareGrid, 0, "Learning rate",
     "kiln_learning_rate", "Learning rate at the latest logged step."},
    {"grad_norm", &MetricRow::grad_norm, "", RankSpread::SameOnEveryRank, 2, 1, kInRunChart | kInCompareGrid, 0,
     "Gradient norm", "kiln_grad_norm", "Gradient norm at the latest logged step."},
    {"tokens_per_s", &MetricRow::tokens_per_s, "tokens/s", RankSpread::PerRank, 3, 1,
     kInRunChart | kInCompareGrid | kInRanks, 0, "Tokens/s", "kiln_tokens_per_second",
     "Training throughput in tokens per second.", SlowEnd::Low},
    {"tflops", &MetricRow::tflops, "TFLOP/s", RankSpread::PerRank, 4, 1, kInCompareChoice, 0, "", "",
     "Model TFLOP/s achieved by this rank's device.", SlowEnd::Low},
    {"mfu", &MetricRow::mfu, "", RankSpread::PerRank, 5, 1, kInRunChart | kInCompareChoice, 0, "MFU", "kiln_mfu_ratio",
     "Model FLOPs utilisation, 0 to 1.", SlowEnd::Low},
    {"mem_used", &MetricRow::mem_used, "bytes", RankSpread::PerRank, 11, 1, kInRunChart | kInCompareGrid | kInRanks, 0,
     "Memory used (bytes)", "kiln_memory_used_bytes", "Device memory in use at the end of the latest step."},
    {"mem_peak", &MetricRow::mem_peak, "bytes", RankSpread::PerRank, 12, 1, kInCompareChoice | kInRanks, 0, "", "",
     "Peak device memory so far."},
    {"fwd_ms", &MetricRow::fwd_ms, "ms", RankSpread::PerRank, 6, 1, kInTimeSplit | kInCompareChoice | kInRanks, 2, "", "",
     "Forward time of the step."},
    {"bwd_ms", &MetricRow::bwd_ms, "ms", RankSpread::PerRank, 7, 1, kInTimeSplit | kInCompareChoice | kInRanks, 2, "", "",
     "Backward time of the step."},
    {"opt_ms", &MetricRow::opt_ms, "ms", RankSpread::PerRank, 8, 1, kInTimeSplit | kInCompareChoice | kInRanks, 1, "", "",
     "Optimizer time of the step."},
    {"comm_ms", &MetricRow::comm_ms, "ms", RankSpread::PerRank, 9, 1, kInTimeSplit | kInCompareChoice | kInRanks, 3, "", "",
     "Exposed (not overlapped) communication of the step."},
    {"data_ms", &MetricRow::data_ms, "ms", RankSpread::PerRank, 10, 1, kInTimeSplit | kInCompareChoice | kInRanks, 3, "", "",
     "Waiting for the next batch."},
    {"loss_scale", &MetricRow::loss_scale, "", RankSpread::SameOnEveryRank, 13, 1, kInCompareChoice, 0, "", "",
     "fp16 dynamic loss scale."},
    {"skipped_steps", &MetricRow::skipped_steps, "", RankSpread::SameOnEveryRank, 14, 1, 0, 0, "", "",
     "Optimizer steps skipped (overflow) so far."},
    {"a2a_ms", &MetricRow::a2a_ms, "ms", RankSpread::PerRank, 17, 5, kInTimeWithin | kInCompareChoice | kInRanks, 2, "",
     "", "Of fwd_ms and bwd_ms, expert parallelism's token all-to-alls."},
    {"trained_tokens", &MetricRow::trained_tokens, "tokens", RankSpread::SameOnEveryRank, 18, 10, kInCompareChoice, 0,
     "", "kiln_trained_tokens", "Tokens of the step's global batch that the loss trained on (not masked)."},
    {"shard_ms", &MetricRow::shard_ms, "ms", RankSpread::PerRank, 19, 14, kInTimeWithin | kInCompareChoice | kInRanks, 2,
     "", "", "Of fwd_ms and bwd_ms, waiting for sharded data parallelism's gathers and reductions."},
    {"pipe_ms", &MetricRow::pipe_ms, "ms", RankSpread::PerRank, 20, 15, kInTimeWithin | kInCompareChoice | kInRanks, 2,
     "", "", "Of fwd_ms and bwd_ms, a pipeline stage waiting for its neighbours' activations and gradients."},
    {"mtp1_loss", &MetricRow::mtp1_loss, "", RankSpread::SameOnEveryRank, 21, 16, kInCompareChoice, 0, "",
     "kiln_mtp1_loss", "Multi-token prediction's loss at depth 1 (the token 2 places ahead), model.mtp_depth >= 1."},
    {"mtp2_loss", &MetricRow::mtp2_loss, "", RankSpread::SameOnEveryRank, 22, 16, kInCompareChoice, 0, "",
     "kiln_mtp2_loss", "Multi-token prediction's loss at depth 2 (3 places ahead), model.mtp_depth >= 2."},
    {"mtp3_loss", &MetricRow::mtp3_loss, "", RankSpread::SameOnEveryRank, 23, 16, kInCompareChoice, 0, "",
     "kiln_mtp3_loss", "Multi-token prediction's loss at depth 3 (4 places ahead), model.mtp_depth >= 3."},
    {"mtp4_loss", &MetricRow::mtp4_loss, "", RankSpread::SameOnEveryRank, 24, 16, kInCompareChoice, 0, "",
     "kiln_mtp4_loss", "Multi-token prediction's loss at depth 4 (5 places ahead), model.mtp_depth = 4."},
};

// The field named `name`, or nullptr.
const MetricField* find_metric_field(std::string_view name);

// The rolled-up fields in block-slot order (metric_blocks.h: a block's aggregates).
std::span<const MetricField* const> block_fields();

// "step, rank, time, ..." in the list's order: the columns SELECT and INSERT name.
const std::string& metric_column_list();

// SQL that adds the metric columns (and their blocks' aggregates, and for a PerRank field its
// columns in the spread's tables, metric_spread.h and spread_blocks.h) of a schema version
// after the first: migrate() runs it after that version's own migration.
std::string metric_columns_added_in(int version);

// The schema version that added the per-step spread across ranks (table metric_spread): its
// columns for the PerRank fields of that version and before come with it.
inline constexpr int kSpreadSince = 17;
// The version that added the spread's 64-step rollup (table spread_blocks, spread_blocks.h),
// likewise with the columns of the fields of that version and before.
inline constexpr int kSpreadBlocksSince = 18;

// The columns a spread field takes in each spread table, <field><suffix>: over the ranks (and,
// in a block, the steps) with a value, its min, max, sum and count, and the ranks at the min
// and the max.
struct SpreadColumn {
  std::string_view suffix;
  std::string_view sql_type;
};
inline constexpr SpreadColumn kSpreadColumns[] = {{"_min", "REAL"},      {"_max", "REAL"},
                                                  {"_sum", "REAL"},      {"_count", "INTEGER"},
                                                  {"_min_rank", "INTEGER"}, {"_max_rank", "INTEGER"}};

// The PerRank fields other than the row's key, in the list's order: the spread's fields.
std::span<const MetricField* const> spread_fields();
// Those whose columns a store of schema `version` has (a migration reads no later ones).
std::vector<const MetricField*> spread_fields_at(int version);

// The field's value as the store reads it back: integers as doubles, an absent one NaN.
double metric_value(const MetricRow& row, const MetricField& field);
// Sets the field from such a value (NaN: absent, for the optional ones).
void set_metric_value(MetricRow& row, const MetricField& field, double value);

// Step and rank: the row's key, which says whose measurements the row holds (never rolled up).
inline bool is_row_key(const MetricField& field) { return field.block_slot < 0; }

// True when the field's SQL type is INTEGER.
bool is_integer_metric(const MetricField& field);

}  // namespace kiln::store
