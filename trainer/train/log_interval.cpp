#include "trainer/train/log_interval.h"

#include "base/check.h"

namespace kiln {

void LogInterval::open(Clock::time_point start) {
  start_ = start;
  loss_ = exchange_ms_ = aside_s_ = 0;
  mtp_losses_.clear();
  steps_ = 0;
}

void LogInterval::add_step(double loss, double exchange_ms, std::span<const double> mtp_losses) {
  loss_ += loss;
  exchange_ms_ += exchange_ms;
  mtp_losses_.resize(mtp_losses.size(), 0.0);
  for (size_t k = 0; k < mtp_losses.size(); ++k) mtp_losses_[k] += mtp_losses[k];
  ++steps_;
}

IntervalMeans LogInterval::close(Clock::time_point now) {
  KILN_CHECK(steps_ > 0, "a log interval closes after at least one step");
  const double steps = static_cast<double>(steps_);
  const double elapsed = std::chrono::duration<double>(now - start_).count() - aside_s_;
  IntervalMeans means{loss_ / steps, elapsed / steps, exchange_ms_ / steps, mtp_losses_};
  for (double& loss : means.mtp_losses) loss /= steps;
  open(now);
  return means;
}

}  // namespace kiln
