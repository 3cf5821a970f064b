#include "trainer/train/run_alerts.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace kiln {
namespace {

// How often the watchdog looks at the step under way: a stall is reported within this of
// alerts.stall_s.
constexpr auto kMostWatchdogSleep = std::chrono::milliseconds(250);

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

RunAlerts::RunAlerts(const AlertsConfig& config, std::vector<RankLimits> ranks, RunRecorder& recorder,
                     std::FILE* out)
    : config_(config),
      actions_(config.action_map()),
      ranks_(ranks),
      recorder_(recorder),
      out_(out),
      hook_(config.command, config.command_timeout_s, out),
      rules_(config, std::move(ranks)) {
  if (config_.stall_s > 0) watchdog_ = std::thread([this] { watch(); });
}

RunAlerts::~RunAlerts() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void RunAlerts::observe(const LoggedStep& step) {
  std::lock_guard lock(mutex_);
  for (const FiredAlert& a : rules_.observe(step)) fire(a);
}

void RunAlerts::check_numbers(int64_t step, double loss, double grad_norm, bool skipped) {
  std::lock_guard lock(mutex_);
  if (auto a = rules_.check_numbers(step, loss, grad_norm, skipped)) fire(*a);
}

void RunAlerts::step_started(int64_t step) {
  std::lock_guard lock(mutex_);
  running_step_ = step;
  step_start_ = Clock::now();
}

void RunAlerts::rewound_to(int64_t step) {
  std::lock_guard lock(mutex_);
  rules_.rewound_to(step);
}

void RunAlerts::step_finished() {
  std::lock_guard lock(mutex_);
  running_step_.reset();
  rules_.step_finished();
}

SteeringDecision RunAlerts::act(SteeringDecision decision) {
  SteeringDecision due;
  std::vector<std::string> rules;
  {
    std::lock_guard lock(mutex_);
    std::swap(due, due_);
    std::swap(rules, due_rules_);
  }
  // A rewind says its own line once it knows where it goes (run_rewinds.h).
  decision.rewind_past = due.rewind_past;
  if (rules.empty()) return decision;
  std::string names;
  for (const std::string& r : rules) names += (names.empty() ? "" : ", ") + r;
  const char* what = due.stop ? "stops" : due.pause ? "pauses" : "checkpoints";
  fmt::print(out_, "kiln: alert action: the run {} at this step boundary ({})\n", what, names);
  std::fflush(out_);
  decision.stop = decision.stop || due.stop;
  decision.checkpoint = decision.checkpoint || due.checkpoint;
  if (due.pause && !decision.stop && !decision.pause) {
    decision.pause = true;
    recorder_.set_paused(true);
  }
  return decision;
}

// Under mutex_.
void RunAlerts::fire(const FiredAlert& alert) {
  const auto action = actions_.find(alert.rule);
  store::Alert row;
  row.time = unix_seconds();
  row.step = alert.step;
  row.rule = alert.rule;
  row.rank = alert.rank;
  row.value = alert.value;
  row.threshold = alert.threshold;
  row.message = alert.message;
  if (action != actions_.end()) {
    row.action = action->second;
    due_.stop = due_.stop || row.action == "stop";
    due_.pause = due_.pause || row.action == "pause";
    due_.checkpoint = due_.checkpoint || row.action == "checkpoint";
    if (row.action == "rewind" && alert.step && due_.rewind_past == 0) due_.rewind_past = *alert.step;
    if (row.action != "rewind" && std::find(due_rules_.begin(), due_rules_.end(), alert.rule) == due_rules_.end())
      due_rules_.push_back(alert.rule);
  }
  fmt::print(out_, "kiln: alert: {}: {}{}\n", alert.rule, alert.message,
             row.action.empty() ? "" : fmt::format(" ({} at the next step boundary)", row.action));
  std::fflush(out_);
  try {
    recorder_.log_alert(row);
  } catch (const std::exception& e) {
    fmt::print(out_, "kiln: warning: the run store could not record the alert: {}\n", e.what());
  }
  if (config_.command.empty()) return;
  nlohmann::json j;
  j["run"] = recorder_.name();
  j["run_id"] = recorder_.run_id();
  j["store"] = recorder_.path();
  j["rule"] = alert.rule;
  j["step"] = alert.step ? nlohmann::json(*alert.step) : nlohmann::json();
  j["rank"] = alert.rank ? nlohmann::json(*alert.rank) : nlohmann::json();
  j["host"] = alert.rank && static_cast<size_t>(*alert.rank) < ranks_.size() ? nlohmann::json(ranks_[*alert.rank].host)
                                                                              : nlohmann::json();
  // A NaN or Inf is no JSON number: the hook gets null, and the message says which.
  j["value"] = std::isfinite(alert.value) ? nlohmann::json(alert.value) : nlohmann::json();
  j["threshold"] = alert.threshold;
  j["message"] = alert.message;
  j["action"] = row.action;
  j["time"] = row.time;
  hook_.run(j.dump(), alert.rule);
}

void RunAlerts::watch() {
  const auto sleep = std::min(kMostWatchdogSleep, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      std::chrono::duration<double>(config_.stall_s / 10)));
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::max(sleep, std::chrono::milliseconds(1)));
    if (stopping_ || !running_step_) continue;
    if (auto a = rules_.check_stall(*running_step_ - 1, seconds_since(step_start_))) fire(*a);
  }
}

}  // namespace kiln
