#include "trainer/train/step_alerts.h"

#include <chrono>
#include <thread>

#include <fmt/core.h>

#include "trainer/telemetry/host_memory.h"
#include "trainer/util/step_clock.h"

namespace kiln {

StepAlerts::StepAlerts(const Config& config, Communicator& world, Ops& ops, SystemProbe& probe,
                       const std::vector<RankGpu>& places, RunRecorder* recorder, LogInterval& interval,
                       std::FILE* out)
    : world_(world), interval_(interval), faults_(FaultPlan::from_environment()) {
  if (!faults_.empty() && world_.rank() == 0)
    fmt::print(out, "kiln: KILN_FAULTS plants {}\n", faults_.describe());
  if (!config.alerts.enabled) return;
  // The memory each rank can reach: on a GPU what it holds and what the device has free
  // besides; on the CPU the machine's.
  double limit = 0;
  if (ops.device() == Device::Cuda) {
    limit = static_cast<double>(probe.memory().used) + static_cast<double>(ops.available_memory());
  } else if (const auto host = host_memory()) {
    limit = static_cast<double>(host->total);
  }
  std::vector<double> limits(static_cast<size_t>(world_.size()), limit);
  if (world_.size() > 1)
    world_.gather(Tensor{limits.data(), DType::F64, {world_.size()}}, Tensor{&limit, DType::F64, {1}}, 0);
  if (!recorder) return;
  std::vector<RankLimits> ranks;
  for (int r = 0; r < world_.size(); ++r) {
    const size_t i = static_cast<size_t>(r);
    ranks.push_back({i < places.size() ? places[i].host : host_name(), static_cast<int64_t>(limits[i])});
  }
  alerts_ = std::make_unique<RunAlerts>(config.alerts, std::move(ranks), *recorder, out);
}

void StepAlerts::before_step(int64_t step) {
  if (alerts_) alerts_->step_started(step);
  const double delay_ms = faults_.delay_ms(step, world_.rank());
  if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
}

void StepAlerts::after_step(int64_t step, StepTimes& times, double grad_norm, bool skipped) {
  // A planted delay is work this rank did, as a slow device's would be.
  times.fwd_ms += faults_.delay_ms(step, world_.rank());
  times.loss = faults_.loss_at(step, times.loss);
  if (!alerts_) return;
  alerts_->step_finished();
  const Clock::time_point start = Clock::now();
  alerts_->check_numbers(step, times.loss, grad_norm, skipped);
  interval_.set_aside(seconds_since(start));
}

void StepAlerts::check_alerts(const std::vector<store::MetricRow>& rows) {
  if (!alerts_ || rows.empty()) return;
  const store::MetricRow& first = rows.front();
  LoggedStep s;
  s.step = first.step;
  s.loss = first.loss;
  s.grad_norm = first.grad_norm;
  s.tokens_per_s = first.tokens_per_s;
  for (const store::MetricRow& row : rows)
    s.ranks.push_back({row.fwd_ms + row.bwd_ms + row.opt_ms, row.mem_peak.value_or(0)});
  // An alert is written to the store at once and starts its hook: time the next interval's
  // throughput leaves out, as it does a checkpoint's, or a spike on a short step would read
  // as a fall in throughput too.
  const Clock::time_point start = Clock::now();
  alerts_->observe(s);
  interval_.set_aside(seconds_since(start));
}

void StepAlerts::rewound_to(int64_t step) {
  if (alerts_) alerts_->rewound_to(step);
}

SteeringDecision StepAlerts::with_alert_actions(SteeringDecision decision) {
  return alerts_ ? alerts_->act(std::move(decision)) : decision;
}

}  // namespace kiln
