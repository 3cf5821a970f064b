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

// A sweep's state: live while its process launches points and waits for them; ended once it
// has launched every point and seen each end; interrupted when it stopped before (a signal,
// an error, or its process gone without a word: a live sweep whose heartbeat went stale
// reads as interrupted).
enum class SweepStatus { Live, Ended, Interrupted };
std::string_view to_string(SweepStatus status);
// "ended" -> Ended; anything else is a kiln::Error.
SweepStatus parse_sweep_status(std::string_view text);

struct SweepSummary {
  int64_t id = 0;
  std::string name;
  double created_at = 0;
  std::optional<double> heartbeat_at, ended_at;
  // As recorded, except that a live sweep whose heartbeat is stale reads as interrupted: the
  // one reading of a sweep's state every view shows (kiln sweep list, the dashboard, the TUI).
  SweepStatus status = SweepStatus::Live;
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
  std::optional<int64_t> steps;  // the steps its run was to train (its config's train.steps)
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

// The point that did best, and the figure it was judged on: of the completed points, the
// lowest final validation loss when any has one (what a sweep is usually chosen by), else the
// lowest final training loss. A point stopped part-way is never judged beside completed ones
// (its loss is of fewer steps); while no point has completed, the best so far is chosen the
// same way among every point with a figure, and is partial. Absent when no point has a figure.
struct BestPoint {
  int64_t point = 0;
  std::string_view metric;  // "final_valid_loss" or "final_loss"
  double value = kNoValue;
  bool partial = false;     // no point has completed: judged on points that stopped part-way
  std::optional<int64_t> last_step, steps;  // the point's, to say how far a partial one got
};
std::optional<BestPoint> best_point(const std::vector<SweepPointRow>& points);

// How every view names the best point: "best", or "best so far (partial: 26/1000 steps)".
std::string best_label(const BestPoint& best);

// Newest first; limit 0: every sweep.
std::vector<SweepSummary> list_sweeps(Database& db, int64_t limit = 0,
                                      double stale_after_s = kDefaultStaleAfterS);

// What a user typed as SWEEP: an id, a name, or an unambiguous prefix of one name. An unknown
// or ambiguous one is an error that lists the candidates.
int64_t resolve_sweep(Database& db, std::string_view id_or_name);
// The sweeps table as resolve_sweep reads it (store/name_lookup.h).
inline constexpr NamedRows kNamedSweeps{.table = "sweeps",
                                        .noun = "sweep",
                                        .list_hint = "`kiln runs list --sweep` takes one",
                                        .digits_may_name = true};

// The sweep with this id and its points; an unknown id is an error.
SweepDetails sweep_details(Database& db, int64_t sweep_id, double stale_after_s = kDefaultStaleAfterS);

}  // namespace kiln::store
