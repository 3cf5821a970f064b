// The training loop on one process: for each step, gradient accumulation over the
// micro-batches of one global batch, clipping, AdamW at the scheduled learning rate;
// a progress line (and a row in the run store) every log interval, validation every eval
// interval, the store's steering commands at every step boundary, a clean stop on Ctrl-C
// or SIGTERM, and a generated sample at the end when asked.
//
// The Trainer composes the collaborators that each own a part of the run and ties them
// together in its loop: where the rank trains and with whom (rank_backend.h), its data
// (training_data.h), the step (step_runner.h), the experts' balance (expert_balance.h), the
// alerts (step_alerts.h), the metrics rows (step_metrics.h), the checkpoints
// (run_checkpoints.h, resume.h), the steering (run_steering.h) and the rewinds past a loss
// spike (run_rewinds.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "kernels/ops.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/layout.h"
#include "trainer/telemetry/system_probe.h"
#include "trainer/train/expert_balance.h"
#include "trainer/train/log_interval.h"
#include "trainer/train/own_plan.h"
#include "trainer/train/rank_backend.h"
#include "trainer/train/run_checkpoints.h"
#include "trainer/train/run_recorder.h"
#include "trainer/train/run_rewinds.h"
#include "trainer/train/run_steering.h"
#include "trainer/train/step_alerts.h"
#include "trainer/train/step_metrics.h"
#include "trainer/train/step_runner.h"
#include "trainer/train/training_data.h"
#include "trainer/train/validation_sampler.h"

namespace kiln {

struct TrainSummary {
  int64_t steps = 0;
  double train_loss = 0;                // mean over the last log interval
  std::optional<double> valid_loss;     // the last validation, when there is a valid split
  std::optional<double> valid_nats_per_byte;  // the same loss per byte of text: compares
                                              // across tokenizers
  bool interrupted = false;             // Ctrl-C or SIGTERM
  bool stopped = false;                 // a stop command from the store
  bool released = false;                // a release command: checkpointed, to be resumed
  std::string run_name;                 // the name it trained under (a resume keeps the checkpoint's)
  std::string last_checkpoint;          // the newest checkpoint this run wrote; empty if none
};

class Trainer {
 public:
  // Checks what the config asks of this process, opens the data, lays out the model and
  // optimizer, restores the checkpoint at `resume` when one is named; prints the run header
  // and memory; creates (or, resuming, continues) the run in the store when
  // record.store_path is set. Throws kiln::Error on bad input, before anything is written.
  // world: the run's processes; with several, they are data-parallel replicas (each reads
  // its slice of every global batch, gradients are summed over all) and only rank 0
  // prints, records and writes checkpoints (the caller gives the others no store).
  Trainer(const Config& config, Communicator& world, const RecordOptions& record = {},
          const std::string& resume = {}, std::FILE* out = stdout);
  ~Trainer();

  TrainSummary run();
  GptModel& model() { return *model_; }

 private:
  // The start-up lines (after the data's notes on their indices), once all is allocated.
  void print_start(const std::string& data_notes);
  // After the first step: how the matrix products' algorithms were chosen, where they were.
  void print_product_tuning();
  // Rank 0 of a recorded run: creates (or continues) the run in the store, with where every
  // rank runs and the run's own plan.
  void start_recording(const RecordOptions& recording);
  void train_loop(TrainSummary& summary);
  // Validation at `step`: its losses into the summary, to the output and the store, with the
  // sample the model writes.
  void validate(int64_t step, TrainSummary& summary);
  double scheduled_lr(int64_t step) const;
  // What the collaborators hold of the training's state, for a checkpoint.
  TrainingState training_state() const;
  // The step's checkpoint, written when it returns.
  std::string save_checkpoint_at(int64_t step);
  // A checkpoint's training state (a resume's, a rewind's) handed to the collaborators that
  // hold each part of it: the one way back, so what save_checkpoint_at writes comes back whole.
  void restore_training_state(const TrainingState& state);
  // Every rank, at the boundary after `step`: back to the checkpoint in `folder`, before the
  // loss spike at spike_step, and past alerts.rewind_skip batches of data. Returns the
  // checkpoint's step, which the loop goes on after.
  int64_t rewind(const std::string& folder, int64_t spike_step, int64_t step);
  bool is_first_rank() const { return world_.rank() == 0; }

  Config config_;  // steering changes its train section as the run goes
  Communicator& world_;
  std::FILE* out_;
  ParallelLayout layout_;
  RankCoordinates coordinates_;  // this rank's place in the layout
  std::unique_ptr<RankBackend> backend_;
  std::unique_ptr<SystemProbe> probe_;
  std::unique_ptr<TrainingData> data_;
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<StepRunner> steps_;
  std::unique_ptr<RunRecorder> recorder_;       // the first rank's, when the run is recorded
  std::unique_ptr<ValidationSampler> sampler_;  // recorded runs with train.sample_tokens > 0
  std::optional<OwnPlan> own_plan_;             // the first rank's, when the planner knows the device
  std::string run_name_;                        // names the run's checkpoint folder
  int64_t first_step_ = 1;                      // > 1 when resuming
  // The seconds the run has spent in its steps so far, those of the checkpoint it resumed
  // included: goodput's numerator (docs/resilience.md#goodput). nullopt: it resumed a
  // checkpoint that did not measure them.
  std::optional<double> step_seconds_ = 0.0;
  int restart_ = 0;                             // RecordOptions::restart
  LogInterval interval_;
  std::unique_ptr<ExpertBalance> experts_;
  std::unique_ptr<StepAlerts> alerts_;
  std::unique_ptr<StepMetrics> metrics_;
  std::unique_ptr<RunCheckpoints> checkpoints_;
  std::unique_ptr<RunSteering> steering_;
  std::unique_ptr<RunRewinds> rewinds_;
};

}  // namespace kiln
