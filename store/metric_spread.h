// The spread across ranks of each wide step (table metric_spread), and the recent-only
// per-rank detail it makes affordable.
//
// A step logged by more than kSpreadAbove ranks is wide: for each PerRank field of the metric
// list (metric_fields.h: spread_fields()) it gets the min, max, sum and count over its ranks,
// with the rank at the min and the rank at the max, so a chart of the whole run draws the
// band, the mean and the slow rank (MetricField::slow says which end) from one row a step
// whatever the world size, and a chart of a long run from one row per 64-step block of them
// (spread_blocks.h). The writer updates both in the transaction that inserts the rows
// (SpreadUpdate, beside metric_blocks.h's BlockUpdate), and then drops the rows of ranks
// other than 0 that have left the window of the newest kRecentSteps wide steps: rank 0's rows
// (the values every rank shares: loss, lr, tokens, ...) and every rank's 64-step blocks stay
// for the whole run. This file owns every statement on the table and that pruning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "store/database.h"
#include "store/metric_fields.h"
#include "store/types.h"

namespace kiln::store {

// A step of more ranks than this is wide. Fewer ranks keep every row and no spread: a spread
// row (about 400 bytes, measured in docs/store.md) would cost a 2-rank run more than pruning
// rank 1's old rows saves, and a chart of 8 ranks draws each one anyway.
inline constexpr size_t kSpreadAbove = 8;

// Wide steps whose rows of every rank are kept: the ranks table, the heat strip and a zoomed
// chart of one rank read them at full resolution. 1,000 steps of 4,096 ranks are about 600 MB
// of rows; past them a rank-step costs its 64-step block (about 16 bytes) and a share of
// the step's spread row, a few tens of bytes in all.
inline constexpr int64_t kRecentSteps = 1000;

// One field over one step's ranks. Ranks are added in increasing order, so a tie keeps the
// lowest rank.
struct FieldSpread {
  double min = kNoValue;
  double max = kNoValue;
  double sum = 0;
  int64_t count = 0;  // ranks with a value
  int min_rank = 0;
  int max_rank = 0;

  bool present() const { return count > 0; }
  void add(int rank, double value);
  // Folds in the spread of what comes after: higher ranks of the step, or later steps (a
  // series' bucket, a block). A tie keeps this spread's rank: the lower, or the earlier step's.
  void merge(const FieldSpread& later);
};

struct StepSpread {
  int64_t step = 0;
  double time = 0;     // the latest of its rows' times
  int64_t ranks = 0;   // rows counted
  int top_rank = std::numeric_limits<int>::min();  // the highest rank counted
  std::vector<FieldSpread> fields;  // in spread_fields() order

  void add(const MetricRow& row);
};

// The spreads of the rows one transaction inserts, and the pruning they bring: add() the
// rows after inserting them (and after BlockUpdate::write has read them), then write() before
// the commit. A step whose new rows all rank above the ranks its stored spread counts merges
// them in; any other (a row replaced by a resumed run, a rank twice) is recomputed from its
// rows, as a metric block is. The spread blocks of the touched steps follow
// (SpreadBlockUpdate). Then the rows of ranks other than 0 of the steps that left the
// window (and of any step this batch logged before it) are deleted: a range of the primary key.
class SpreadUpdate {
 public:
  void add(std::span<const MetricRow> rows);
  // Writes every touched step and its block, prunes, and starts over empty.
  void write(Database& db, int64_t run_id);

 private:
  struct Pending {
    StepSpread spread;
    bool ordered = true;  // every rank added above the one before it: no rank twice
    int lowest_rank = 0;
  };
  std::map<int64_t, Pending> pending_;  // by step
};

// Migration 17: the spread of every wide step already stored, and the old rows pruned.
void build_spreads(Database& db);

// Calls visit with the stored spread of each of the run's wide steps in [first_step,
// last_step], in step order: the given fields' (spread_fields(), or those a migration's
// version has; StepSpread::top_rank is left unread). visit must not write metric_spread.
void for_each_spread(Database& db, int64_t run_id, int64_t first_step, int64_t last_step,
                     std::span<const MetricField* const> fields, const std::function<void(const StepSpread&)>& visit);

// The first step of the run's recent window when rows before it were pruned: the
// kRecentSteps-th newest wide step, with a wide step before it; nullopt otherwise.
std::optional<int64_t> pruned_before(Database& db, int64_t run_id);

// Whether the run has a wide step: its charts of every rank read the spread.
bool has_spread(Database& db, int64_t run_id);

// The metric rows of the steps in [first_step, last_step], in (step, rank) order, that no
// spread stands for: every rank's of a narrow step, rank 0's alone of a wide one (it holds
// the values every rank shares: loss, lr, tokens). A wide step's other rows are not read.
// Returns how many of the steps are wide. The live stream sends these rows beside the wide
// steps' spread.
size_t for_each_row_beside_spread(Database& db, int64_t run_id, const std::function<void(const MetricRow&)>& visit,
                                  int64_t first_step, int64_t last_step);

// The ranks counted by the spread of the run's `step`; 0 when the step is not wide.
int64_t wide_step_ranks(Database& db, int64_t run_id, int64_t step);

// One point of a spread series: a bucket of wide steps.
struct SpreadPoint {
  int64_t step = 0;  // the bucket's last wide step (with a value of the key or not), with its
                     // time and rank count: what a block keeps of its steps
  double time = 0;
  int64_t ranks = 0;
  double min = 0;   // over the bucket's steps and ranks
  double mean = 0;  // sum over count
  double max = 0;
  int slow_rank = 0;  // the rank at the slow end (MetricField::slow) and its value
  double slow = 0;
};

// The spread of `key` (a PerRank field) over the wide steps in [first_step, last_step], in at
// most max_points buckets of equal steps (0: a point a step); a bucket without a value of the
// key has no point. An unknown key, or one that is not per rank, is an error. As
// metric_series does, it reads the rows (one a step) while a bucket is narrower than a
// 64-step block, and otherwise buckets of whole blocks from spread_blocks.h, their edges on
// multiples of kStepsPerBlock, with the (at most two) blocks the range cuts read from their
// rows: the same answer a walk of the rows gives for buckets on those edges (the mean to the
// rounding of its sum, which adds in another order). Narrow buckets that would read more than
// max_rows rows (0: no bound) come from whole blocks too, as SeriesQuery::max_rows does.
std::vector<SpreadPoint> spread_series(Database& db, int64_t run_id, const std::string& key,
                                       int64_t first_step, int64_t last_step, size_t max_points,
                                       size_t max_rows = 0);

}  // namespace kiln::store
