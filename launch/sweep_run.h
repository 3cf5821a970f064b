// A sweep's points run and recorded (kiln sweep, docs/sweeps.md): each point's run recorded
// in the store as it launches (store/sweep_writer.h), the sweep's heartbeat while its points
// run (launch/sweep_points.h), and its end: ended when every point launched and was seen to
// end, interrupted when it stopped before (a signal, a point it could not start). The caller
// hears each launch and each end, with the point's run as the store has it, and prints them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch/sweep_points.h"
#include "store/database.h"
#include "store/run_overview.h"

namespace kiln::launch {

// How a launched point ended.
struct PointEnd {
  const SweepTask& task;
  int exit_status = 0;                  // 128 + signal when a signal ended it
  std::optional<store::RunOverview> run;  // its run, when it recorded one
  double seconds = 0.0;                   // into the sweep
};

struct SweepListener {
  std::function<void(const SweepTask&)> launching;  // after the point's run is recorded
  std::function<void(const PointEnd&)> finished;
};

struct SweepResult {
  int64_t launched = 0;
  int64_t failures = 0;  // points whose kiln train exited non-zero
  bool interrupted = false;
};

// Runs the tasks of sweep `sweep_id` (already created or claimed in db) as children of `kiln`,
// slots.parallel at a time, and records the sweep's end. A point that cannot start is a
// kiln::Error, and the sweep is recorded as interrupted.
SweepResult run_sweep(const std::string& kiln, store::Database& db, int64_t sweep_id,
                      const std::vector<SweepTask>& tasks, const SweepSlots& slots, const SweepListener& listener);

}  // namespace kiln::launch
