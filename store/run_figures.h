// Figures the history views (the CLI, the dashboard) derive from a run's record and rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/types.h"

namespace kiln::store {

// Running or paused with a fresh heartbeat: a run that steering commands can reach.
bool is_live(RunStatus status);

// How long the run has run: to its end, to its last heartbeat if it was lost, to now if it
// is live. NaN for a run that never started.
double run_duration_s(const RunRecord& run, double now_s);

// Goodput: the share of the run's wall clock spent in steps that survive (docs/resilience.md#goodput),
// step_seconds over the seconds that count: the earlier attempts' and this one's, to its end,
// its last heartbeat when it was lost, now while it is live. nullopt before the run's first
// logged step, and for a run recorded before schema 12 or resumed from a checkpoint that did
// not measure its steps.
std::optional<double> goodput(const RunRecord& run, double now_s);

// Seconds a step took at the latest logged step, as rank 0 measured it (wall clock: the
// tokens a step trains over its tokens/s); NaN without a step, tokens or a rate.
double measured_step_s(const std::vector<MetricRow>& latest);

// The step time a slowdown is judged on: the median of rank 0's last kPersistentSteps logged
// steps, each its tokens a step over that step's tokens/s (`rates`, oldest first), so that one
// slow step (a run starting beside it) is not a slow run; NaN with fewer logged steps, with one
// that measured nothing, or without rank 0's tokens a step in `latest`.
inline constexpr size_t kPersistentSteps = 5;  // webui/run_plan.js: persistentSteps
double persisting_step_s(const std::vector<MetricRow>& latest, const std::vector<double>& rates);

// A run whose measured step is this many times its planned one is slower than planned.
inline constexpr double kSlowerThanPlanned = 1.2;
// Whether measured_s is more than 20% over planned_s; false when either is absent.
bool slower_than_planned(double planned_s, double measured_s);

// train.steps of a recorded config, if it has one. Read leniently: a run's record must stay
// readable whatever kiln version wrote it, so text that is not JSON gives nothing.
std::optional<int64_t> planned_steps(const std::string& config_json);

}  // namespace kiln::store
