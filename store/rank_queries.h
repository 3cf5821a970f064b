// Reading a run rank by rank, for the straggler view (the dashboard's Ranks panel, the
// terminal UI's ranks block): each rank's place and latest step with the slowest marked, and
// a heat strip of every rank's step time against the median rank's over a step range.
//
// A rank's working time is its forward, backward and optimizer time. Exposed communication
// and data wait are left out: a fast rank spends them waiting for a slow one, so counting
// them would make every rank look as slow as the straggler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// The parts of the step that were measured, summed; NaN when none was.
double step_ms(const MetricRow& row);
// fwd + bwd + opt, the parts measured; NaN when none was.
double working_ms(const MetricRow& row);
// The median of the values that are not NaN (the mean of the two middle ones when their
// count is even); NaN when there are none.
double median_of(std::vector<double> values);

// The index in `rows` (one step's rows, one per rank) of the rank with the longest working
// time; nullopt with fewer than two ranks measured, or when they all took the same time.
std::optional<size_t> slowest_of(std::span<const MetricRow> rows);

// One rank: where it runs (empty host and device for a run recorded before kiln kept them)
// and its row at the run's latest logged step (absent when it logged none there).
struct RankState {
  int rank = 0;
  std::string host;
  std::string device;
  std::optional<int64_t> pid;
  std::optional<MetricRow> latest;
};

struct RanksNow {
  std::vector<RankState> ranks;  // by rank: every rank with a place or a latest row
  std::optional<int64_t> step;   // the latest logged step
  std::optional<int> slowest;    // the rank slowest_of names
  double median_working_ms = kNoValue;
};

// Reads the places and the latest step in one snapshot. An unknown run is an error.
RanksNow ranks_now(Database& db, int64_t run_id);

// The heat strip's bounds: columns per answer, rows per answer (a larger world is folded,
// several ranks to a row), and rank-rows one answer reads (fewer columns for a large world:
// 128 at 1,024 ranks, 32 at 4,096; 2^18 took 350 / 509 ms p50 / p95 at 1,024 ranks on the
// 2-core VM, bench/README.md).
inline constexpr size_t kMaxHeatColumns = 512;
inline constexpr size_t kMaxHeatRows = 1024;
inline constexpr size_t kMaxHeatCells = size_t{1} << 17;

struct HeatQuery {
  int64_t from = std::numeric_limits<int64_t>::min();  // steps, both ends included
  int64_t to = std::numeric_limits<int64_t>::max();
  size_t max_columns = 200;  // at most kMaxHeatColumns
  size_t max_rows = kMaxHeatRows;
};

// Ranks x steps, over the steps whose rows of every rank are kept (metric_spread.h: a range
// reaching back before the recent window starts at it). A range with more logged steps than
// the columns allow is sampled: for each
// column, the first logged step at or after a mark spaced evenly from the range's first
// logged step to its last (both ends in, none twice), each one seek of the key, so the cost
// is the columns' rows whatever the range holds. A world of more ranks than rows folds
// `group` consecutive ranks into a row, which shows the slowest of them (a straggler is never
// averaged away).
struct RankHeat {
  std::vector<int64_t> steps;  // a column per step
  int group = 1;               // ranks per row
  std::vector<int> ranks;      // each row's first rank
  // Per row, per column: the step time of the row's slowest rank at that step, and its
  // working time over the median rank's; NaN where the row logged nothing there.
  std::vector<std::vector<double>> step_ms;
  std::vector<std::vector<double>> relative;
};

RankHeat rank_heat(Database& db, int64_t run_id, const HeatQuery& query);

// The first of the run's newest `steps` logged steps (a HeatQuery's `from` for a strip of
// the recent steps, one column each); nullopt for a run without steps. One seek per step.
std::optional<int64_t> recent_from(Database& db, int64_t run_id, size_t steps);

}  // namespace kiln::store
