// Reading sweeps (kiln sweep, docs/sweeps.md): the list with each sweep's progress, resolving
// what a user typed, and one sweep's points with their runs' figures for the views that
// compare them (the dashboard's sweep page, the terminal UI's sweep screen, kiln sweep show).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/database.h"
#include "store/run_queries.h"
#include "store/types.h"

namespace kiln::store {

// A sweep holds at most this many points (kiln sweep refuses more), so one sweep's details
// are bounded.
inline constexpr int64_t kMaxSweepPoints = 10000;

struct SweepSummary {
  int64_t id = 0;
  std::string name;
  double created_at = 0;
  std::optional<double> heartbeat_at, ended_at;
  bool live = false;  // its heartbeat is fresh and it has not ended
  std::string spec_json, command_line, workdir, host;
  // Of its points: all of them, those with a run launched, and of those runs the completed,
  // the running or paused (heartbeat fresh), and the failed or lost (heartbeat stale).
  int64_t points = 0, launched = 0, completed = 0, running = 0, failed = 0;
};

struct SweepPointRow {
  int64_t point = 0;
  std::string params_json;      // {"train.lr": 0.001, ...}
  std::optional<int64_t> run_id;  // absent: not launched, or its run not recorded yet
  std::string run_name;         // empty: not launched
  RunStatus status = RunStatus::Created;  // effective, as runs list reads it; Created when not launched
  std::optional<int64_t> last_step;
  // Training loss: the mean over ranks at the last logged step, and the lowest such mean over
  // the logged steps; validation loss: at the last validation, and the lowest; the tokens/s
  // at the last logged step (mean over ranks). kNoValue when absent.
  double final_loss = kNoValue, best_loss = kNoValue;
  double final_valid_loss = kNoValue, best_valid_loss = kNoValue;
  double tokens_per_s = kNoValue;
};

struct SweepDetails {
  SweepSummary sweep;
  std::vector<SweepPointRow> points;    // by point
  std::vector<std::string> parameters;  // the swept keys, in the order the points give them
};

// The point that did best, and the figure it was judged on: the lowest final validation loss
// when any point has one (what a sweep is usually chosen by), else the lowest final training
// loss; absent when no point has either.
struct BestPoint {
  int64_t point = 0;
  std::string_view metric;  // "final_valid_loss" or "final_loss"
  double value = kNoValue;
};
std::optional<BestPoint> best_point(const std::vector<SweepPointRow>& points);

// Newest first; limit 0: every sweep.
std::vector<SweepSummary> list_sweeps(Database& db, int64_t limit = 0,
                                      double stale_after_s = kDefaultStaleAfterS);

// What a user typed as SWEEP: an id, a name, or an unambiguous prefix of one name. An unknown
// or ambiguous one is an error that lists the candidates.
int64_t resolve_sweep(Database& db, std::string_view id_or_name);

// The sweep with this id and its points; an unknown id is an error.
SweepDetails sweep_details(Database& db, int64_t sweep_id, double stale_after_s = kDefaultStaleAfterS);

}  // namespace kiln::store
