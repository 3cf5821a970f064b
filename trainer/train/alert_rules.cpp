#include "trainer/train/alert_rules.h"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "base/human_format.h"

namespace kiln {
namespace {

// A spike must stand out by its z-score against at least this fraction of the mean as its
// spread: a loss that has sat flat for a while would otherwise alert on its first wobble.
constexpr double kLeastRelativeSpread = 0.01;
// A straggler is also at least this much slower than the median rank: on a tiny CPU step the
// scheduler's jitter alone is a large fraction of the work.
constexpr double kLeastStragglerMs = 1.0;

template <class T>
void remember(std::deque<T>& history, T value, int window) {
  history.push_back(value);
  while (history.size() > static_cast<size_t>(window)) history.pop_front();
}

double median_of(std::vector<double> values) {
  // The lower middle: with two ranks, the faster one, which a single slow rank cannot move.
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace

AlertRules::AlertRules(const AlertsConfig& config, std::vector<RankLimits> ranks)
    : config_(config), ranks_(std::move(ranks)), slow_streak_(ranks_.size(), 0) {}

bool AlertRules::starts(const std::string& key, bool holds) {
  if (!holds) {
    active_.erase(key);
    return false;
  }
  return active_.insert(key).second;
}

std::vector<FiredAlert> AlertRules::observe(const LoggedStep& s) {
  std::vector<FiredAlert> fired;
  if (auto a = spike("loss_spike", "loss", config_.loss_zscore, losses_, s, s.loss)) fired.push_back(std::move(*a));
  if (auto a = spike("grad_spike", "gradient norm", config_.grad_zscore, grad_norms_, s, s.grad_norm))
    fired.push_back(std::move(*a));
  if (auto a = slow_throughput(s)) fired.push_back(std::move(*a));
  stragglers(s, fired);
  memory(s, fired);
  return fired;
}

std::optional<FiredAlert> AlertRules::check_numbers(int64_t step, double loss, double grad_norm, bool skipped) {
  const bool bad_loss = !std::isfinite(loss);
  const bool bad_norm = !std::isfinite(grad_norm) && !skipped;
  if (!starts("nan", bad_loss || bad_norm)) return std::nullopt;
  FiredAlert a;
  a.rule = "nan";
  a.step = step;
  a.value = bad_loss ? loss : grad_norm;
  a.threshold = 0;
  a.message = bad_loss ? fmt::format("loss is {} at step {}", std::isnan(loss) ? "nan" : "infinite", step)
                       : fmt::format("gradient norm is {} at step {}", std::isnan(grad_norm) ? "nan" : "infinite", step);
  return a;
}

std::optional<FiredAlert> AlertRules::check_stall(int64_t last_step, double seconds) {
  const double limit = config_.stall_s;
  if (!starts("stall", limit > 0 && seconds >= limit)) return std::nullopt;
  FiredAlert a;
  a.rule = "stall";
  a.step = last_step + 1;
  a.value = seconds;
  a.threshold = limit;
  a.message = fmt::format("step {} has run {:.1f} s without finishing (alerts.stall_s={:g})", last_step + 1,
                          seconds, limit);
  return a;
}

void AlertRules::rewound_to(int64_t step) {
  for (std::deque<StepValue>* history : {&losses_, &grad_norms_})
    while (!history->empty() && history->back().step > step) history->pop_back();
  active_.erase("loss_spike");
  active_.erase("grad_spike");
}

std::optional<FiredAlert> AlertRules::spike(const char* rule, const char* what, double zscore,
                                            std::deque<StepValue>& history, const LoggedStep& s, double value) {
  if (zscore <= 0 || !std::isfinite(value)) return std::nullopt;
  bool holds = false;
  double mean = 0, spread = 0;
  if (history.size() >= static_cast<size_t>(config_.min_samples)) {
    for (const StepValue& v : history) mean += v.value;
    mean /= static_cast<double>(history.size());
    double squares = 0;
    for (const StepValue& v : history) squares += (v.value - mean) * (v.value - mean);
    spread = std::max(std::sqrt(squares / static_cast<double>(history.size())), kLeastRelativeSpread * std::abs(mean));
    holds = spread > 0 && (value - mean) / spread > zscore;
  }
  // A spike stays out of the history, so the next step is judged against the run as it was.
  if (!holds) remember(history, StepValue{s.step, value}, config_.window);
  if (!starts(rule, holds)) return std::nullopt;
  FiredAlert a;
  a.rule = rule;
  a.step = s.step;
  a.value = value;
  a.threshold = mean + zscore * spread;
  a.message = fmt::format("{} {:.4g} at step {} is {:.1f} standard deviations above the mean {:.4g} of the "
                          "last {} logged steps",
                          what, value, s.step, (value - mean) / spread, mean, history.size());
  return a;
}

std::optional<FiredAlert> AlertRules::slow_throughput(const LoggedStep& s) {
  const double fraction = config_.throughput_fraction;
  if (fraction <= 0 || !(s.tokens_per_s > 0)) return std::nullopt;
  bool slow = false;
  double median = 0;
  if (throughputs_.size() >= static_cast<size_t>(config_.min_samples)) {
    median = median_of({throughputs_.begin(), throughputs_.end()});
    slow = s.tokens_per_s < fraction * median;
  }
  if (!slow) remember(throughputs_, s.tokens_per_s, config_.window);
  // Short steps on a busy machine dip below half their median now and then: a slowdown must
  // last alerts.throughput_steps logged steps to fire, and as long a recovery to end it, or a
  // healthy run on a shared machine alerts every few steps.
  slow_steps_ = slow ? slow_steps_ + 1 : 0;
  recovered_steps_ = slow ? 0 : recovered_steps_ + 1;
  const bool firing = active_.count("throughput") > 0;
  const bool holds = firing ? recovered_steps_ < config_.throughput_steps : slow_steps_ >= config_.throughput_steps;
  if (!starts("throughput", holds)) return std::nullopt;
  FiredAlert a;
  a.rule = "throughput";
  a.step = s.step;
  a.value = s.tokens_per_s;
  a.threshold = fraction * median;
  a.message = fmt::format("{:.0f} tokens/s at step {} is {:.1f}% of the median {:.0f} of the last {} logged steps, "
                          "below {:g} of it for {} logged steps in a row",
                          s.tokens_per_s, s.step, 100 * s.tokens_per_s / median, median, throughputs_.size(), fraction,
                          slow_steps_);
  return a;
}

void AlertRules::stragglers(const LoggedStep& s, std::vector<FiredAlert>& fired) {
  const double fraction = config_.straggler_fraction;
  if (fraction <= 0 || s.ranks.size() < 2) return;
  std::vector<double> work;
  for (const RankStep& r : s.ranks) work.push_back(r.work_ms);
  const double median = median_of(work);
  const double limit = std::max(median * (1 + fraction), median + kLeastStragglerMs);
  for (size_t r = 0; r < s.ranks.size() && r < slow_streak_.size(); ++r) {
    const double mine = s.ranks[r].work_ms;
    slow_streak_[r] = mine > limit ? slow_streak_[r] + 1 : 0;
    if (!starts(fmt::format("straggler/{}", r), slow_streak_[r] >= config_.straggler_steps)) continue;
    FiredAlert a;
    a.rule = "straggler";
    a.step = s.step;
    a.rank = static_cast<int>(r);
    a.value = mine;
    a.threshold = limit;
    a.message = fmt::format("rank {} on {} worked {:.1f} ms a step, {:.2f}x the median rank's {:.1f} ms, for {} "
                            "logged steps in a row",
                            r, ranks_[r].host, mine, median > 0 ? mine / median : 0.0, median, slow_streak_[r]);
    fired.push_back(std::move(a));
  }
}

void AlertRules::memory(const LoggedStep& s, std::vector<FiredAlert>& fired) {
  const double fraction = config_.memory_fraction;
  if (fraction <= 0) return;
  for (size_t r = 0; r < s.ranks.size() && r < ranks_.size(); ++r) {
    const int64_t limit = ranks_[r].memory_bytes;
    if (limit <= 0) continue;
    const double threshold = fraction * static_cast<double>(limit);
    const int64_t held = s.ranks[r].memory_bytes;
    if (!starts(fmt::format("memory/{}", r), static_cast<double>(held) > threshold)) continue;
    FiredAlert a;
    a.rule = "memory";
    a.step = s.step;
    a.rank = static_cast<int>(r);
    a.value = static_cast<double>(held);
    a.threshold = threshold;
    a.message = fmt::format("rank {} on {} has held {} of the {} it can reach ({:.0f}%, over alerts.memory_fraction="
                            "{:g})",
                            r, ranks_[r].host, human_bytes(static_cast<uint64_t>(held)),
                            human_bytes(static_cast<uint64_t>(limit)),
                            100.0 * static_cast<double>(held) / static_cast<double>(limit), fraction);
    fired.push_back(std::move(a));
  }
}

}  // namespace kiln
