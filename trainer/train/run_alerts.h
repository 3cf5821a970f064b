// A run's alerts on its first rank (docs/alerts.md): the rules judge what the trainer hands
// them; each firing is a line on the run's output, a row in the store's `alerts` table (with
// an `alert` event), the user's hook, and the rule's action, which the trainer takes at its
// next step boundary through the path the steering commands take.
//
// A watchdog thread fires `stall` while a step runs too long: it records and runs the hook
// while the training thread is stuck in a collective.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/steer/steering.h"
#include "trainer/train/alert_hook.h"
#include "trainer/train/alert_rules.h"
#include "trainer/train/run_recorder.h"
#include "trainer/util/step_clock.h"

namespace kiln {

class RunAlerts {
 public:
  RunAlerts(const AlertsConfig& config, std::vector<RankLimits> ranks, RunRecorder& recorder, std::FILE* out);
  // Stops the watchdog and waits for the hooks still running.
  ~RunAlerts();
  RunAlerts(const RunAlerts&) = delete;
  RunAlerts& operator=(const RunAlerts&) = delete;

  void observe(const LoggedStep& step);
  void check_numbers(int64_t step, double loss, double grad_norm, bool skipped);
  // The watchdog times each step from its start to its end; what lies between steps
  // (validation, checkpoints, a pause) is not a stall.
  void step_started(int64_t step);
  void step_finished();
  // `decision` with the actions of the alerts fired since the last call added.
  SteeringDecision act(SteeringDecision decision);
  // The run went back to the checkpoint of `step` (a rewind): the rules forget what came after.
  void rewound_to(int64_t step);

 private:
  void fire(const FiredAlert& alert);
  void watch();

  AlertsConfig config_;
  std::map<std::string, std::string> actions_;  // by rule
  std::vector<RankLimits> ranks_;
  RunRecorder& recorder_;
  std::FILE* out_;
  AlertHook hook_;
  std::mutex mutex_;  // the rules, the step under way and the actions due, shared with the watchdog
  AlertRules rules_;
  std::optional<int64_t> running_step_;
  Clock::time_point step_start_;
  SteeringDecision due_;
  std::vector<std::string> due_rules_;  // whose actions pause, checkpoint or stop
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace kiln
