#include "launch/sweep_run.h"

#include <chrono>

#include "store/run_queries.h"
#include "store/sweep_writer.h"

namespace kiln::launch {
namespace {

constexpr auto kHeartbeatInterval = std::chrono::seconds(5);

}  // namespace

SweepResult run_sweep(const std::string& kiln, store::Database& db, int64_t sweep_id,
                      const std::vector<SweepTask>& tasks, const SweepSlots& slots, const SweepListener& listener) {
  SweepResult result;
  SweepOutcome outcome;
  // A sweep that stops before every point has run and ended (a signal, a point it cannot
  // start) is recorded as interrupted, never as ended.
  try {
    store::SweepHeartbeat heartbeat(db.path(), sweep_id, kHeartbeatInterval);
    const auto started = std::chrono::steady_clock::now();
    outcome = run_sweep_tasks(
        kiln, tasks, slots,
        [&](const SweepTask& task) {
          store::set_point_run(db, sweep_id, task.point, task.run_name);
          listener.launching(task);
        },
        [&](const SweepTask& task, int exit_status) {
          PointEnd end{task, exit_status, std::nullopt, 0.0};
          if (const auto id = store::find_run_named(db, task.run_name))
            end.run = store::run_overview(db, store::get_run(db, *id), store::unix_now());
          end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          if (exit_status != 0) ++result.failures;
          listener.finished(end);
        });
  } catch (...) {
    store::end_sweep(db, sweep_id, store::SweepStatus::Interrupted);
    throw;
  }
  store::end_sweep(db, sweep_id, outcome.interrupted ? store::SweepStatus::Interrupted : store::SweepStatus::Ended);
  result.launched = outcome.launched;
  result.interrupted = outcome.interrupted;
  return result;
}

}  // namespace kiln::launch
