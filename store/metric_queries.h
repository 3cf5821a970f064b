// Reading metrics: one key's series for charts (optionally downsampled on the store's side),
// every raw row for export, and the summary figures that compare runs.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// The metrics columns a series can be drawn from (loss, lr, grad_norm, tokens_per_s, ...).
std::span<const std::string_view> metric_keys();

struct SeriesQuery {
  std::string key = "loss";
  std::vector<int> ranks;  // empty: every rank
  int64_t first_step = std::numeric_limits<int64_t>::min();
  int64_t last_step = std::numeric_limits<int64_t>::max();
  // Points per rank at most; 0: every row. Downsampling cuts the steps from the first to the
  // last with a value (of any wanted rank, within first_step..last_step) into equal buckets
  // and keeps, per bucket, the last value and the min and max, so a spike is never lost from
  // the chart. Buckets narrower than kStepsPerBlock (64) steps start at the first step and
  // come from the rows. Wider ones are whole blocks of 64 steps (step 64k to 64k+63, the
  // first bucket starting at the first step's block), as few per bucket as keep the count
  // within max_points, and come from the store's per-block aggregates (metric_blocks.h):
  // a 1000-point chart of a long run reads one block per 64 steps instead of every row, with
  // the values a scan would give (a block the step range cuts is read from its rows).
  // Buckets of 64 blocks or more are whole superblocks of 4,096 steps likewise (the first
  // starting at the first step's superblock; metric_superblocks.h), a superblock the range
  // cuts read from its blocks in the range.
  size_t max_points = 0;
  // Rows a downsampled series may read over all its ranks (0: no bound). Buckets narrower
  // than a block that would read more come from whole blocks instead (a point a block), and
  // buckets narrower than a superblock whose blocks would number more come from whole
  // superblocks (a point a superblock), so an answer of many ranks or steps costs its
  // superblocks, not every rank's blocks.
  size_t max_rows = 0;
};

// One point: the bucket's last row (step, time, value) and the extremes over the bucket.
// Without downsampling a bucket is one row, so min == max == value.
struct SeriesPoint {
  int64_t step = 0;
  double time = 0;
  double value = 0;
  double min = 0;
  double max = 0;
};

struct RankSeries {
  int rank = 0;
  std::vector<SeriesPoint> points;  // by step
};

// Rows where the key is NULL (not measured) are skipped. An unknown key is an error that
// lists the valid ones. Ranks come back in increasing order, each with at least one point.
// The reads share one snapshot, so a commit landing meanwhile shows whole or not at all.
std::vector<RankSeries> metric_series(Database& db, int64_t run_id, const SeriesQuery& query);

// Every metric row of the run in (step, rank) order, without sampling: for export. Rows
// stream through `visit`, so a run of any size needs no memory for them.
void for_each_metric(Database& db, int64_t run_id, const std::function<void(const MetricRow&)>& visit,
                     int64_t first_step = std::numeric_limits<int64_t>::min(),
                     int64_t last_step = std::numeric_limits<int64_t>::max());

// The figures `kiln runs compare` tabulates. A step's value is the mean over the ranks
// that logged it (pipeline stages without the loss log NULL and do not count).
struct RunSummary {
  int64_t run_id = 0;
  std::string name;
  RunStatus status = RunStatus::Created;
  int64_t logged_steps = 0;
  std::optional<int64_t> last_step;
  double final_loss = kNoValue;  // at the last logged step
  double best_loss = kNoValue;   // lowest over the logged steps
  std::optional<int64_t> best_step;
  double best_valid_loss = kNoValue;
  // Means over the logged steps after the first one (the first includes warm-up).
  double mean_tokens_per_s = kNoValue;
  double mean_tflops = kNoValue;
  double mean_mfu = kNoValue;
  double elapsed_s = kNoValue;  // start to the last logged step
  // The first step whose loss is at or below the target, and the seconds from the run's
  // start to it; absent if there was no target or the run never reached it.
  std::optional<int64_t> target_step;
  double time_to_target_s = kNoValue;
};

RunSummary summarize_run(Database& db, int64_t run_id,
                         std::optional<double> target_loss = std::nullopt);

}  // namespace kiln::store
