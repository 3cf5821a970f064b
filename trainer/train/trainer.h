// The training loop on one process: for each step, gradient accumulation over the
// micro-batches of one global batch, clipping, AdamW at the scheduled learning rate;
// a progress line (and a row in the run store) every log interval, validation every eval
// interval, the store's steering commands at every step boundary, a clean stop on Ctrl-C
// or SIGTERM, and a generated sample at the end when asked.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "trainer/config/config.h"
#include "trainer/data/sample_source.h"
#include "trainer/data/token_batch.h"
#include "trainer/data/tokenizer.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/gpu_placement.h"
#include "trainer/parallel/gradient_buckets.h"
#include "trainer/parallel/layout.h"
#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/train/checkpoint_failures.h"
#include "trainer/train/pipeline_executor.h"
#include "trainer/train/fault_plan.h"
#include "trainer/train/run_alerts.h"
#include "trainer/telemetry/system_probe.h"
#include "trainer/train/core_share.h"
#include "trainer/train/device_step.h"
#include "trainer/train/run_recorder.h"
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

// One step's loss and where its time went (milliseconds, host clock; the device is waited
// for at each phase's end on steps that are logged, so the split is the device's too).
struct StepTimes {
  double loss = 0;
  double data_ms = 0;
  double fwd_ms = 0;
  double bwd_ms = 0;
  double comm_ms = 0;  // summing the gradients over the data-parallel ranks
  double a2a_ms = 0;   // of fwd_ms and bwd_ms, the expert group's token exchanges
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
  // Loads the tokenizer and opens the training and validation samples; what the datasets
  // say about their cached indices goes to `notes`.
  void open_data(std::FILE* notes);
  // The start-up lines (after the data's notes on their indices), once all is allocated.
  void print_start(const std::string& data_notes);
  // After the first step: how the matrix products' algorithms were chosen, where they were.
  void print_product_tuning();
  void train_loop(TrainSummary& summary);
  // Trains the coming step on this run's share of the cores as other CPU runs start and end.
  void share_machine(int64_t step);
  // One step and its optimizer update at learning rate lr: replayed as a CUDA graph once
  // warmed up where the run allows (device_step_, docs/gpu.md#cuda-graphs), else op by op.
  struct StepOutcome {
    StepTimes times;
    OptimizerStep update;
    double opt_ms = 0;
  };
  StepOutcome run_step(int64_t step, bool timed, double lr);
  // The replayed step; nullopt when it cannot be captured, after a line saying why (the run
  // then steps op by op: device_step_ goes).
  std::optional<StepOutcome> replay_step(int64_t step, double lr);
  // The first sample of the coming step that this data-parallel replica reads.
  int64_t first_sample() const;
  StepTimes train_step(bool timed);
  // Pipeline parallelism: the stage's part of the step's micro-batches (from first_sample on),
  // then the loss shared by every stage.
  void pipeline_step(int64_t first_sample, const std::function<void()>& phase_end,
                     StepTimes& times);
  // With tied embeddings over several stages: the gradients of the first stage's embedding
  // and of the last stage's copy, summed over the two.
  void sum_tied_embedding(StepTimes& times);
  // Prints how the layers are split over the stages and the schedule's bubble.
  void print_pipeline() const;
  // Mean validation loss per token, and per byte of the target tokens' text.
  std::pair<double, double> evaluate();
  void fill_batch(const SampleSource& data, int64_t first_sample, int slot = 0);
  double scheduled_lr(int64_t step) const;
  store::MetricRow metric_row(int64_t step, double loss, double lr, double grad_norm,
                              double seconds_per_step, const StepTimes& times, double opt_ms) const;
  // Rank 0: reads the store's commands and applies the settings among them; the caller acts
  // on pause, resume, stop and checkpoint, then records the outcomes with record_steering.
  SteeringDecision steer(bool paused);
  // Rank 0: records and prints the outcomes of the last steer(), naming the checkpoint
  // written for them (when one was).
  void record_steering(int64_t step, const std::string& checkpoint_path);
  // Rank 0, paused: polls the store until a command resumes, stops or asks for a checkpoint
  // (or Ctrl-C); records the others as they come.
  SteeringDecision wait_while_paused(int64_t step);
  // Every rank: holds the run at the boundary after `step` until resumed; true when it
  // must stop.
  bool hold_paused(int64_t step, bool& interrupted);
  std::string apply_setting(const Setting& setting);
  // Writes the checkpoint of `step` (once per step) and records it; returns its path. Every
  // rank calls it at the same step (a sharded optimizer's state is gathered); the first
  // writes.
  std::string save_checkpoint_at(int64_t step);
  // The first rank, when the checkpoint of `step` could not be written: warns, records an
  // `error` event and returns "" (no checkpoint), or throws once train.checkpoint_failures
  // have failed in a row.
  std::string checkpoint_not_written(int64_t step, const std::string& why);

  // Rank 0's steering at a step boundary, sent to every rank so all act at the same step.
  SteeringDecision share_decision(SteeringDecision decision, bool& interrupted);
  // Sums the replicas' gradients (and their losses, averaged) over the data-parallel ranks.
  void reduce_gradients(StepTimes& times);
  // Every rank's row of a logged step, gathered to rank 0, which hands them to the store.
  void record_step(store::MetricRow row);
  // Alerts (trainer_alerts.cpp, docs/alerts.md). Collective: reads KILN_FAULTS and, on the
  // first rank of a recorded run, starts the rules over every rank's memory limit.
  void start_alerts();
  // Around each step, on every rank: the planted faults, the stall watchdog, NaN checks.
  void before_step(int64_t step);
  void after_step(int64_t step, StepTimes& times, double grad_norm, bool skipped);
  // The first rank: a logged step's rows, every rank's, through the rules.
  void check_alerts(const std::vector<store::MetricRow>& rows);
  // Rank 0: `decision` with the actions of the alerts fired since the last step boundary.
  SteeringDecision with_alert_actions(SteeringDecision decision);
  // After each step of a model with MoE layers: their routing over the step, summed over
  // every rank, moves the aux-loss-free selection bias and, on a logged step, goes to the
  // store (trainer_experts.cpp). Collective over the world when it communicates.
  // Returns this rank's milliseconds in the expert group's exchanges over the step.
  double finish_expert_step(int64_t step, bool logged);
  // Hands expert_bias_ to this rank's MoE layers.
  void apply_expert_bias();
  bool is_first_rank() const { return world_.rank() == 0; }
  // Picks this rank's GPU, makes the ops, and on a GPU the device communicator.
  void start_backend();
  // This rank's communicator over `ranks` (as layout_ names a group): the host one, joined
  // on a GPU run by its device twin. Collective over the world.
  std::unique_ptr<Communicator> join_group(const std::vector<int>& ranks);
  // Rank 0: which GPU each rank trains on and how their tensors move.
  // Gathers where every rank runs (host, GPU, process) on the first rank, for the store, and
  // prints which GPU each rank took. Collective.
  void place_ranks();
  // The planner's view of this run (trainer/plan/, kiln plan): its layout's predicted step on
  // this backend's device, and the memory it plans for this rank beside what the rank
  // allocated. Nothing on a GPU the planner's table does not know (trainer_plan.cpp).
  struct OwnPlan {
    double step_s = 0;
    size_t planned_bytes = 0;
    size_t allocated_bytes = 0;
  };
  std::optional<OwnPlan> plan_own_run() const;
  // "kiln: planned 12.3 ms a step and 63.1 MiB on rank 0 (kiln plan); measured memory ..."
  void print_plan() const;

  // Restores the model, optimizer and data position from a checkpoint of the same model,
  // and the run's name into `recording` unless the user gave one.
  void resume_from(const std::string& resume, RecordOptions& recording);
  // Says which schedule keys a resumed run changed and what that does to the learning rate.
  void warn_of_schedule_changes(const nlohmann::json& checkpoint_config, const std::string& resume);

  Config config_;
  Communicator& world_;
  ParallelLayout layout_;
  RankCoordinates coordinates_;  // this rank's place in the layout
  // Declared before the communicators, which a GPU run's copy with the ops: they go first.
  std::unique_ptr<Ops> ops_;
  int gpu_ = 0;  // the device a GPU run's ops run on
  // A GPU run's device communicator over every rank (NCCL, or MPI staged through host
  // memory), from which each group splits its own; null on the CPU, where MPI moves all.
  std::unique_ptr<Communicator> device_world_;
  std::unique_ptr<Communicator> tensor_group_;  // this rank's groups, as layout_ names them
  std::unique_ptr<Communicator> data_group_;
  std::unique_ptr<Communicator> pipeline_group_;
  // Context parallelism's groups (layout.h): the ranks that share each sequence, and the
  // data-parallel and context-parallel ranks that sum the gradients; null when cp is 1.
  std::unique_ptr<Communicator> context_group_;
  std::unique_ptr<Communicator> data_context_group_;
  // The ranks that sum each gradient: data_context_group_, else data_group_.
  Communicator& gradient_group() const { return data_context_group_ ? *data_context_group_ : *data_group_; }
  // Expert parallelism's groups (layout.h); null when parallel.ep is 1.
  std::unique_ptr<Communicator> expert_group_;
  std::unique_ptr<Communicator> expert_data_group_;
  // The first and last stages of a pipeline whose output layer is tied to the embedding;
  // null elsewhere.
  std::unique_ptr<Communicator> embedding_group_;
  int accum_ = 1;  // micro-batches per step on each rank
  PipelineSchedule schedule_;  // this stage's, with pipeline parallelism
  std::FILE* out_;
  std::unique_ptr<SystemProbe> probe_;
  std::unique_ptr<CoreShare> core_share_;  // a CPU run's share of the machine; null on a device
  int threads_ = 0;                         // the CPU threads it trains on now
  std::unique_ptr<SampleSource> train_data_;
  std::unique_ptr<SampleSource> valid_data_;  // null without a valid split or eval_iters
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<GradientBuckets> buckets_;  // with several data-parallel ranks
  std::unique_ptr<PipelineExecutor> pipeline_;  // with several pipeline stages
  // With CUDA graphs: the step captured once and replayed; null when the run does not allow
  // it (graphs_why_not_ says why) or a capture failed.
  std::unique_ptr<DeviceStep> device_step_;
  std::string graphs_why_not_;
  int64_t steps_run_ = 0;  // by this process: the warm-up before a capture
  LossScaler loss_scaler_;
  std::unique_ptr<TokenBatch> batch_;
  std::unique_ptr<RunRecorder> recorder_;
  std::vector<RankGpu> rank_places_;  // every rank's, on the first rank (place_ranks)
  std::unique_ptr<ValidationSampler> sampler_;  // recorded runs with train.sample_tokens > 0
  std::vector<store::Command> steering_pending_;  // what steer() read, until recorded
  SteeringDecision steering_;                     // and what it decided
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int64_t> token_bytes_;  // bytes of text per id (0 for end-of-document, padding)
  std::string run_name_;        // names the run's checkpoint folder
  int64_t first_step_ = 1;      // > 1 when resuming
  int64_t consumed_samples_ = 0;  // training samples read so far: the data position
  int64_t saved_step_ = 0;      // the step of the last checkpoint written
  std::string last_checkpoint_;  // its folder, on the first rank, once this run has written one
  CheckpointFailures checkpoint_failures_;  // the first rank's
  // Seconds of the current log interval spent not training (validation, checkpoints,
  // pauses): left out of its tokens/s, as Megatron's timers leave them out.
  double not_training_s_ = 0;
  double lr_scale_ = 1;  // `kiln runs set`: the schedule times this
  bool releasing_ = false;  // a release command was applied: the run ends as `released`
  // Every MoE layer's selection bias (this rank's layers and the others'), by layer: the
  // same on every rank, moved by the world's counts, so rank 0 checkpoints all of it.
  std::map<int, std::vector<double>> expert_bias_;
  std::optional<OwnPlan> own_plan_;  // the first rank's, when the planner knows the device
  int64_t model_flops_per_token_ = 0;
  double peak_flops_ = 0;  // 0: unknown device, no MFU
  FaultPlan faults_;                  // KILN_FAULTS, on every rank
  std::unique_ptr<RunAlerts> alerts_;  // the first rank's, with alerts.enabled and a store
};

}  // namespace kiln
