#include "trainer/train/step_metrics.h"

#include <vector>

#include "store/metric_fields.h"
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

void StepMetrics::record_step(store::MetricRow row, std::optional<double> step_seconds) {
  const MemoryReading memory = probe_->memory();
  row.mem_used = memory.used;
  row.mem_peak = memory.peak;
  if (world_.size() == 1) {
    recorder_->log_step(row, step_seconds);
    alerts_.check_alerts({row});
    return;
  }
  // What differs between ranks travels (the metric list's per-rank fields); step, loss, lr
  // and grad norm are the same on all.
  std::vector<const store::MetricField*> per_rank;
  for (const store::MetricField& f : store::kMetricFields)
    if (f.spread == store::RankSpread::PerRank && !store::is_row_key(f)) per_rank.push_back(&f);
  const auto fields = static_cast<int64_t>(per_rank.size());
  std::vector<double> mine;
  for (const store::MetricField* f : per_rank) mine.push_back(store::metric_value(row, *f));
  std::vector<double> all(static_cast<size_t>(fields * world_.size()));
  world_.gather(Tensor{all.data(), DType::F64, {static_cast<int64_t>(all.size())}},
                Tensor{mine.data(), DType::F64, {fields}}, 0);
  if (!recorder_) return;
  std::vector<store::MetricRow> rows;
  for (int r = 0; r < world_.size(); ++r) {
    const double* v = all.data() + r * fields;
    row.rank = r;
    for (size_t k = 0; k < per_rank.size(); ++k) store::set_metric_value(row, *per_rank[k], v[k]);
    recorder_->log_step(row, r == 0 ? step_seconds : std::nullopt);
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
  if (times.shard_ms) row.shard_ms = *times.shard_ms;
  if (times.pipe_ms) row.pipe_ms = *times.pipe_ms;
  if (config_.precision.dtype == "fp16") row.loss_scale = loss_scaler_.scale();
  row.skipped_steps = loss_scaler_.skipped_steps();
  row.trained_tokens = times.trained_tokens;
  // The interval's means, as the loss is (the trainer puts them in times).
  for (size_t k = 0; k < times.mtp_losses.size(); ++k) row.*store::kMtpLossMembers[k] = times.mtp_losses[k];
  return row;
}

}  // namespace kiln
