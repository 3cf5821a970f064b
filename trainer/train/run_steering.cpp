#include "trainer/train/run_steering.h"

#include <chrono>
#include <thread>

#include <fmt/core.h>

#include "base/human_format.h"
#include "trainer/parallel/wait_limits.h"
#include "trainer/train/interrupt.h"
#include "trainer/util/step_clock.h"

namespace kiln {

namespace {

constexpr auto kPausePoll = std::chrono::milliseconds(200);

}  // namespace

RunSteering::RunSteering(TrainConfig& train, Communicator& world, RunRecorder* recorder, StepAlerts& alerts,
                         LogInterval& interval, std::FILE* out)
    : train_(train), world_(world), recorder_(recorder), alerts_(alerts), interval_(interval), out_(out) {}

std::string RunSteering::apply_setting(const Setting& setting) {
  TrainConfig& t = train_;
  if (setting.key == "train.lr") {
    // A command queued past the steering doors' checks (a store written by hand) meets the
    // same bound here: the scale must be one the next checkpoint can hold.
    if (const std::string problem = lr_scale_problem(setting.value / t.lr); !problem.empty())
      fail(fmt::format("train.lr={} would scale the schedule by {:g}, outside what a run can hold: {}", setting.text,
                       setting.value / t.lr, problem));
    lr_scale_ = setting.value / t.lr;
    return fmt::format("peak lr now {:g} (the schedule times {:g})", setting.value, lr_scale_);
  }
  if (setting.key == "train.lr_scale") {
    lr_scale_ = setting.value;
    return fmt::format("the schedule times {:g} (peak lr {:g})", lr_scale_, t.lr * lr_scale_);
  }
  const auto steps = static_cast<int64_t>(setting.value);
  if (setting.key == "train.log_interval") {
    t.log_interval = steps;
    return fmt::format("logging every {} steps", steps);
  }
  t.eval_interval = steps;
  return steps > 0 ? fmt::format("validating every {} steps", steps)
                   : std::string("validation off");
}

SteeringDecision RunSteering::steer(bool paused) {
  steering_pending_ = recorder_->pending_commands();
  if (steering_pending_.empty()) return {};
  steering_ = decide(steering_pending_, paused);
  for (size_t i = 0; i < steering_.settings.size(); ++i) {
    CommandOutcome& outcome = steering_.outcomes[steering_.setting_outcome[i]];
    try {
      outcome.reason += ": " + apply_setting(steering_.settings[i]);
    } catch (const Error& e) {
      outcome.applied = false;
      outcome.reason = e.what();
    }
  }
  return steering_;
}

void RunSteering::record_steering(int64_t step, const std::string& checkpoint_path) {
  if (steering_pending_.empty()) return;
  const std::vector<store::Command> pending = std::move(steering_pending_);
  steering_pending_.clear();
  for (size_t i = 0; i < pending.size(); ++i) {
    const auto action = pending[i].action;
    CommandOutcome& o = steering_.outcomes[i];
    // These write a checkpoint first (an empty path: it could not be written, and the run
    // warned why).
    if (o.applied && (action == store::CommandAction::Checkpoint || action == store::CommandAction::Stop ||
                      action == store::CommandAction::Release))
      o.reason += checkpoint_path.empty() ? "; its checkpoint could not be written" : "; wrote " + checkpoint_path;
  }
  recorder_->record(steering_, step);
  for (size_t i = 0; i < pending.size(); ++i) {
    const CommandOutcome& o = steering_.outcomes[i];
    fmt::print(out_, "kiln: command {} ({}) {} after step {}: {}\n", o.command_id,
               store::to_string(pending[i].action), o.applied ? "applied" : "rejected", step,
               o.reason);
  }
  std::fflush(out_);
  if (steering_.pause) recorder_->set_paused(true);
  if (steering_.resume) recorder_->set_paused(false);
}

SteeringDecision RunSteering::share_decision(SteeringDecision decision, bool& interrupted) {
  decision = send_to_every_rank(alerts_.with_alert_actions(std::move(decision)), interrupted);
  releasing_ = releasing_ || decision.release;
  return decision;
}

SteeringDecision RunSteering::send_to_every_rank(SteeringDecision decision, bool& interrupted) {
  if (world_.size() == 1) return decision;
  // What the step boundary decided, and the settings it may have changed, as rank 0 has
  // them; small integers travel exactly as doubles.
  TrainConfig& t = train_;
  double control[] = {static_cast<double>(decision.pause),
                      static_cast<double>(decision.resume),
                      static_cast<double>(decision.stop),
                      static_cast<double>(decision.checkpoint),
                      static_cast<double>(decision.release),
                      static_cast<double>(interrupted),
                      static_cast<double>(t.log_interval),
                      static_cast<double>(t.eval_interval),
                      lr_scale_,
                      static_cast<double>(decision.rewind_past)};
  world_.broadcast(Tensor{control, DType::F64, {std::size(control)}}, 0);
  decision.pause = control[0] != 0;
  decision.resume = control[1] != 0;
  decision.stop = control[2] != 0;
  decision.checkpoint = control[3] != 0;
  decision.release = control[4] != 0;
  interrupted = control[5] != 0;
  t.log_interval = static_cast<int>(control[6]);
  t.eval_interval = static_cast<int>(control[7]);
  lr_scale_ = control[8];
  decision.rewind_past = static_cast<int64_t>(control[9]);
  return decision;
}

SteeringDecision RunSteering::wait_while_paused(int64_t step) {
  while (!interrupt_requested()) {
    // Sleeping, not spinning: a paused run leaves its cores (and GPU) idle. The store's
    // writer thread keeps the heartbeat going meanwhile.
    std::this_thread::sleep_for(kPausePoll);
    const SteeringDecision decision = steer(true);
    if (decision.resume || decision.stop || decision.checkpoint) return decision;
    record_steering(step, {});
  }
  return {};
}

bool RunSteering::hold_paused(int64_t step, bool& interrupted, const std::function<std::string()>& checkpoint) {
  const Clock::time_point start = Clock::now();
  if (recorder_)
    fmt::print(out_, "kiln: paused after step {}; resume with: kiln runs resume {} --store {}\n",
               step, recorder_->name(), recorder_->path());
  std::fflush(out_);
  bool stop = false;
  for (bool paused = true; paused;) {
    // Rank 0 watches the store while the others wait for its word, idle; what it hears is
    // shared, so a checkpoint asked for during the pause is written by every rank together.
    SteeringDecision decision = is_first_rank() ? wait_while_paused(step) : SteeringDecision{};
    interrupted = interrupt_requested();
    {
      const UnlimitedWaits for_the_pause;  // however long it lasts
      decision = share_decision(decision, interrupted);
    }
    const std::string written = decision.checkpoint || decision.stop ? checkpoint() : std::string();
    if (recorder_) record_steering(step, written);
    stop = decision.stop;
    paused = !decision.resume && !stop && !interrupted;
  }
  const double waited_s = seconds_since(start);
  interval_.set_aside(waited_s);
  if (!stop && !interrupted) {
    fmt::print(out_, "kiln: resumed after {} paused\n", human_duration(waited_s));
    std::fflush(out_);
  }
  return stop;
}

}  // namespace kiln
