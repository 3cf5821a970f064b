// A logged step's metrics: the row each rank measures (throughput, FLOP/s and MFU, the time
// split, memory), gathered to the first rank, which hands every rank's to the run store and
// to the alert rules.
#pragma once

#include <cstdint>
#include <string>

#include "store/types.h"
#include "trainer/config/config.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/layout.h"
#include "trainer/telemetry/system_probe.h"
#include "trainer/train/run_recorder.h"
#include "trainer/train/step_alerts.h"
#include "trainer/train/step_times.h"

namespace kiln {

class StepMetrics {
 public:
  // device_name: the op backend's (Ops::name), whose dense peak MFU divides by. recorder: the
  // first rank's, when the run is recorded.
  StepMetrics(const Config& config, Communicator& world, const ParallelLayout& layout, SystemProbe& probe,
              const LossScaler& loss_scaler, const std::string& device_name, RunRecorder* recorder,
              StepAlerts& alerts);

  store::MetricRow metric_row(int64_t step, double loss, double lr, double grad_norm,
                              double seconds_per_step, const StepTimes& times, double opt_ms) const;
  // Every rank's row of a logged step, gathered to rank 0, which hands them to the store.
  // Collective over the world. step_seconds: goes with rank 0's row (RunRecorder::log_step).
  void record_step(store::MetricRow row, std::optional<double> step_seconds);

 private:
  const Config& config_;
  Communicator& world_;
  const ParallelLayout& layout_;
  SystemProbe* probe_;
  const LossScaler& loss_scaler_;
  RunRecorder* recorder_;
  StepAlerts& alerts_;
  int64_t model_flops_per_token_ = 0;
  double peak_flops_ = 0;  // 0: unknown device, no MFU
};

}  // namespace kiln
