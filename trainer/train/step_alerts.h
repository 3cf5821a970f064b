// A run's alerts around its steps (docs/alerts.md): the faults KILN_FAULTS plants on every
// rank, and on the first rank the rules over each step and each logged step's rows (with the
// watchdog for a stalled step, run_alerts.h), whose actions join the next step boundary's
// steering decision.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "kernels/ops.h"
#include "store/types.h"
#include "trainer/config/config.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/gpu_placement.h"
#include "trainer/steer/steering.h"
#include "trainer/telemetry/system_probe.h"
#include "trainer/train/fault_plan.h"
#include "trainer/train/log_interval.h"
#include "trainer/train/run_alerts.h"
#include "trainer/train/run_recorder.h"
#include "trainer/train/step_times.h"

namespace kiln {

class StepAlerts {
 public:
  // Collective: reads KILN_FAULTS and, with alerts.enabled, gathers every rank's memory limit
  // to the first rank, which starts the rules when the run is recorded (recorder not null).
  // places: every rank's, on the first rank. The time the rules take is set aside from the
  // log interval's throughput.
  StepAlerts(const Config& config, Communicator& world, Ops& ops, SystemProbe& probe,
             const std::vector<RankGpu>& places, RunRecorder* recorder, LogInterval& interval, std::FILE* out);

  // Around each step, on every rank: the planted faults, the stall watchdog, NaN checks.
  void before_step(int64_t step);
  void after_step(int64_t step, StepTimes& times, double grad_norm, bool skipped);
  // The first rank: a logged step's rows, every rank's, through the rules.
  void check_alerts(const std::vector<store::MetricRow>& rows);
  // Rank 0: `decision` with the actions of the alerts fired since the last step boundary.
  SteeringDecision with_alert_actions(SteeringDecision decision);
  // The run went back to the checkpoint of `step` (a rewind past a loss spike).
  void rewound_to(int64_t step);

 private:
  Communicator& world_;
  LogInterval& interval_;
  FaultPlan faults_;                   // KILN_FAULTS, on every rank
  std::unique_ptr<RunAlerts> alerts_;  // the first rank's, with alerts.enabled and a store
};

}  // namespace kiln
