// Steering at step boundaries: the store's commands read by the first rank, their settings
// applied (learning rate, intervals), the decision (with the alerts' actions) shared with
// every rank so all act at the same step, the outcomes recorded; and holding the run while
// paused.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "store/types.h"
#include "trainer/config/config.h"
#include "trainer/parallel/communicator.h"
#include "trainer/steer/setting.h"
#include "trainer/steer/steering.h"
#include "trainer/train/log_interval.h"
#include "trainer/train/run_recorder.h"
#include "trainer/train/step_alerts.h"

namespace kiln {

class RunSteering {
 public:
  // train: the run's settings, which the commands change in place. recorder: the first
  // rank's, when the run is recorded. The time a pause holds the run is set aside from the log
  // interval's throughput.
  RunSteering(TrainConfig& train, Communicator& world, RunRecorder* recorder, StepAlerts& alerts,
              LogInterval& interval, std::FILE* out);

  // `kiln runs set`: the schedule times this.
  double lr_scale() const { return lr_scale_; }
  // A checkpoint's scale, which a resume or a rewind goes on with.
  void restore_lr_scale(double lr_scale) { lr_scale_ = lr_scale; }
  // A release command was applied: the run ends as `released`.
  bool releasing() const { return releasing_; }

  // Rank 0: reads the store's commands and applies the settings among them; the caller acts
  // on pause, resume, stop and checkpoint, then records the outcomes with record_steering.
  SteeringDecision steer(bool paused);
  // Rank 0: records and prints the outcomes of the last steer(), naming the checkpoint
  // written for them (when one was).
  void record_steering(int64_t step, const std::string& checkpoint_path);
  // Rank 0's steering at a step boundary, with the alerts' actions, sent to every rank so all
  // act at the same step.
  SteeringDecision share_decision(SteeringDecision decision, bool& interrupted);
  // Every rank: holds the run at the boundary after `step` until resumed, writing the step's
  // checkpoint by `checkpoint` (every rank together) when a command asks; true when it must
  // stop.
  bool hold_paused(int64_t step, bool& interrupted, const std::function<std::string()>& checkpoint);

 private:
  // Rank 0, paused: polls the store until a command resumes, stops or asks for a checkpoint
  // (or Ctrl-C); records the others as they come.
  SteeringDecision wait_while_paused(int64_t step);
  std::string apply_setting(const Setting& setting);
  // Rank 0's decision and interruption, and the settings it may have changed, on every rank.
  SteeringDecision send_to_every_rank(SteeringDecision decision, bool& interrupted);
  bool is_first_rank() const { return world_.rank() == 0; }

  TrainConfig& train_;
  Communicator& world_;
  RunRecorder* recorder_;
  StepAlerts& alerts_;
  LogInterval& interval_;
  std::FILE* out_;
  double lr_scale_ = 1;
  bool releasing_ = false;
  std::vector<store::Command> steering_pending_;  // what steer() read, until recorded
  SteeringDecision steering_;                     // and what it decided
};

}  // namespace kiln
