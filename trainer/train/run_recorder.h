// The trainer's side of the run store: rank 0 records its run through one RunRecorder.
//
// It opens the store and creates the run (so a store it cannot write fails before step 1),
// hands each logged step's rows to the store's writer thread (the training thread never
// waits for the disk), adds a system row at most every few seconds, reads the commands
// that steer the run and records what became of them, and ends the run with its status.
// With several ranks, rank 0 gathers every rank's row over the communicator and records
// them together; with one rank its own row is the interval's only row.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/run_writer.h"
#include "store/types.h"
#include "trainer/steer/steering.h"
#include "trainer/telemetry/system_probe.h"

namespace kiln {

struct RecordOptions {
  std::string store_path;  // the store file; empty: the run is not recorded
  std::string name;        // the run's name; taken, it is an error
  bool name_given = true;  // false: a default name, which gets "-2", "-3", ... when taken
  std::string command_line;
  // The dashboard it serves beside the training, which kiln runs resume and fork start again.
  store::RunLaunch launch;
  std::vector<std::string> tags;
  // The checkpoint a resumed run continues from, and its step: the store's run of the same
  // name, when there is one, is continued rather than a new one created, unless it has ended
  // and this is another training from its checkpoint (store::ResumeRequest): then a new run,
  // named NAME-2 (-3, ...), records it with that run as its parent.
  std::string resumed_from;
  int64_t resumed_step = 0;
  // This training runs the checkpoint's config unchanged (its alert hook aside).
  bool resumed_unchanged = false;
  // The checkpoint's step seconds (TrainingState::step_seconds), which goodput goes on from.
  std::optional<double> resumed_step_seconds;
  // kiln train --max-restarts started this training again after the run failed: its Nth
  // restart (0: not a restart). The time since the failure counts against goodput.
  int restart = 0;
  // Continue that run even while the store shows it live (the user knows its process is gone).
  bool force_resume = false;
  // A fork: resumed from another run's checkpoint under a new name, that run and its step.
  std::string parent_name;
  std::optional<int64_t> parent_step;
  // A sweep's point (kiln sweep launches it): the sweep's id in the store and the point.
  std::optional<int64_t> sweep_id;
  std::optional<int64_t> sweep_point;
};

class RunRecorder {
 public:
  // Creates the run as `running`. Throws kiln::Error (store: ...) when the store cannot be
  // opened for writing or the name is taken.
  RunRecorder(const RecordOptions& options, store::RunInfo info, SystemProbe& probe);

  const std::string& name() const { return name_; }
  // Why a resumed checkpoint's run, which has ended, was not continued and this training
  // became a new run: "" when it was not so.
  const std::string& another_training() const { return another_training_; }
  // Whether this training continues a run the store holds (a resume), not a new one.
  bool continued() const { return continued_; }
  int64_t run_id() const { return run_id_; }
  const std::string& path() const { return path_; }

  // One logged step of one rank (rank 0 records every rank's). Now and then, with rank 0's
  // row, this process's system readings too. step_seconds: the seconds the run has spent in
  // steps that survive, as of this step (with rank 0's row).
  void log_step(const store::MetricRow& row, std::optional<double> step_seconds = std::nullopt);
  void log_valid(int64_t step, double loss);
  void log_samples(std::vector<store::Sample> samples);
  // Rank 0, once per logged step: one load per MoE layer, summed over the step's
  // micro-batches and the data-parallel ranks. Past the store's bounds (store/types.h:
  // kMaxExpertLayers, kMaxExpertsPerLayer) or with a negative count it throws kiln::Error
  // (store: ...) at once, so a model the store cannot show is refused at its first step.
  void log_expert_loads(std::vector<store::ExpertLoad> loads);
  void log_event(std::string_view kind, std::string message, int64_t step);

  std::vector<store::Command> pending_commands() { return writer_.pending_commands(); }
  // Marks each command of the decision applied or rejected at `step`.
  void record(const SteeringDecision& decision, int64_t step);
  void set_paused(bool paused);
  // seconds: how long training stood still for it.
  void log_checkpoint(int64_t step, const std::string& path, int64_t bytes, const std::string& layout,
                      double seconds);
  void record_ranks(const std::vector<store::RankPlace>& places) { writer_.record_ranks(places); }
  int64_t log_alert(store::Alert alert) { return writer_.log_alert(std::move(alert)); }
  // A rewind past a loss spike, after the rows queued before it (store::RunWriter::log_rewind).
  void log_rewind(store::Rewind rewind) { writer_.log_rewind(std::move(rewind)); }
  // How many rewinds the run has made, a resumed run's before this process included.
  int64_t rewind_count() { return writer_.rewind_count(); }

  // Ends the run and waits for the disk, a bounded time (RunWriter::close): what the store
  // could not take by then goes to a recovery file. Returns the store's failure, if any, as
  // one line naming that file and the command that loads it, instead of throwing: the
  // training is over either way, and the caller reports it.
  std::string finish(store::RunStatus status, const std::string& error = {});

 private:
  store::RunWriter writer_;
  SystemProbe& probe_;
  std::string path_;
  std::string name_;
  std::string another_training_;
  bool continued_ = false;
  int64_t run_id_ = 0;
  std::chrono::steady_clock::time_point next_system_sample_;
};

// The name a run gets without --name: the config's file name (or "tiny" for the embedded
// config) and the local start time, e.g. "gpt2-124m-20261122-141503".
std::string default_run_name(const std::string& config_path);

}  // namespace kiln
