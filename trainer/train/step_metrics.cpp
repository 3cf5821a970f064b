#include "trainer/train/step_metrics.h"

#include <iterator>
#include <vector>

#include "trainer/model/flops.h"

namespace kiln {

StepMetrics::StepMetrics(const Config& config, Communicator& world, const ParallelLayout& layout, SystemProbe& probe,
                         const LossScaler& loss_scaler, const std::string& device_name, RunRecorder* recorder,
                         StepAlerts& alerts)
    : config_(config),
      world_(world),
      layout_(layout),
      probe_(&probe),
      loss_scaler_(loss_scaler),
      recorder_(recorder),
      alerts_(alerts),
      model_flops_per_token_(model_flops_per_token(config.model)),
      peak_flops_(peak_bf16_flops(device_name)) {}

void StepMetrics::record_step(store::MetricRow row) {
  const MemoryReading memory = probe_->memory();
  row.mem_used = memory.used;
  row.mem_peak = memory.peak;
  if (world_.size() == 1) {
    recorder_->log_step(row);
    alerts_.check_alerts({row});
    return;
  }
  // What differs between ranks travels; step, loss, lr and grad norm are the same on all.
  double mine[] = {row.tokens_per_s, row.tflops, row.mfu, row.fwd_ms, row.bwd_ms, row.opt_ms,
                   row.comm_ms, row.data_ms, static_cast<double>(*row.mem_used),
                   static_cast<double>(*row.mem_peak), row.a2a_ms};
  constexpr int64_t kFields = std::size(mine);
  std::vector<double> all(static_cast<size_t>(kFields * world_.size()));
  world_.gather(Tensor{all.data(), DType::F64, {static_cast<int64_t>(all.size())}},
                Tensor{mine, DType::F64, {kFields}}, 0);
  if (!recorder_) return;
  std::vector<store::MetricRow> rows;
  for (int r = 0; r < world_.size(); ++r) {
    const double* v = all.data() + r * kFields;
    row.rank = r;
    row.tokens_per_s = v[0];
    row.tflops = v[1];
    row.mfu = v[2];
    row.fwd_ms = v[3];
    row.bwd_ms = v[4];
    row.opt_ms = v[5];
    row.comm_ms = v[6];
    row.data_ms = v[7];
    row.mem_used = static_cast<int64_t>(v[8]);
    row.mem_peak = static_cast<int64_t>(v[9]);
    row.a2a_ms = v[10];
    recorder_->log_step(row);
    rows.push_back(row);
  }
  alerts_.check_alerts(rows);
}

store::MetricRow StepMetrics::metric_row(int64_t step, double loss, double lr, double grad_norm,
                                         double seconds_per_step, const StepTimes& times,
                                         double opt_ms) const {
  const int64_t tokens_per_step = static_cast<int64_t>(config_.train.global_batch) * config_.model.seq_len;
  store::MetricRow row;
  row.step = step;
  row.rank = world_.rank();
  row.tokens = step * tokens_per_step;
  row.loss = loss;
  row.lr = lr;
  row.grad_norm = grad_norm;
  row.tokens_per_s = static_cast<double>(tokens_per_step) / seconds_per_step;
  row.tflops = row.tokens_per_s * static_cast<double>(model_flops_per_token_) / 1e12;
  if (peak_flops_ > 0) row.mfu = utilisation(row.tokens_per_s, model_flops_per_token_, peak_flops_);
  row.fwd_ms = times.fwd_ms;
  row.bwd_ms = times.bwd_ms;
  row.opt_ms = opt_ms;
  row.comm_ms = times.comm_ms;
  row.data_ms = times.data_ms;
  if (layout_.ep() > 1) row.a2a_ms = times.a2a_ms;
  if (config_.precision.dtype == "fp16") row.loss_scale = loss_scaler_.scale();
  row.skipped_steps = loss_scaler_.skipped_steps();
  return row;
}

}  // namespace kiln
