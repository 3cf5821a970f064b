// The Trainer: a run set up from its config (groups, backend, data, model, optimizer, a
// checkpoint to resume, the store), then its loop of steps, validations, checkpoints and
// steering until the last step, a stop or Ctrl-C. Its start-up lines are trainer_banner.cpp.
#include "trainer/train/trainer.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <tuple>

#include <fmt/core.h>

#include "base/check.h"
#include "base/terminal_text.h"
#include "base/human_format.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/parallel/layout.h"
#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/train/generate.h"
#include "trainer/train/interrupt.h"
#include "trainer/train/resume.h"
#include "trainer/train/sharded_units.h"
#include "trainer/plan/rank_build.h"
#include "trainer/util/step_clock.h"

namespace kiln {

namespace {

// A FILE* whose text is kept in memory until asked for.
class NoteBuffer {
 public:
  NoteBuffer() : file_(open_memstream(&text_, &size_)) {
    KILN_CHECK(file_ != nullptr, "cannot open a memory stream");
  }
  ~NoteBuffer() {
    std::fclose(file_);
    std::free(text_);
  }
  NoteBuffer(const NoteBuffer&) = delete;
  NoteBuffer& operator=(const NoteBuffer&) = delete;
  std::FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(text_, size_);
  }

 private:
  char* text_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

}  // namespace

Trainer::Trainer(const Config& config, Communicator& world, const RecordOptions& record,
                 const std::string& resume, std::FILE* out)
    : config_(config),
      world_(world),
      out_(out),
      layout_(parallel_layout(config_, world.size())),
      coordinates_(layout_.coordinates(world.rank())) {
  for (const std::string& warning : fit_to_steps(config_.train)) fmt::print(out_, "kiln: warning: {}\n", warning);
  KILN_CHECK(!config_.data.paths.empty(), "data.paths is empty: name at least one dataset prefix");
  // Before anything is allocated or joined: interleaving refuses a step it cannot schedule.
  PipelineSchedule schedule = stage_schedule(config_, layout_, coordinates_.pp);
  backend_ = std::make_unique<RankBackend>(config_, layout_, world_, out_);
  Ops& ops = backend_->ops();
  probe_ = std::make_unique<SystemProbe>(ops, backend_->gpu());

  const ModelConfig& m = config_.model;
  // What the datasets say about their indices waits for the header: a refusal further on
  // stays one line.
  NoteBuffer data_notes;
  data_ = std::make_unique<TrainingData>(config_, data_notes.file());

  const DType dtype = compute_dtype(config_.precision, ops.device());
  const RankGroups groups = backend_->groups();
  const ModelSplit split = rank_model_split(config_, layout_, groups, coordinates_.pp);
  // A stage holds the activations of as many micro-batches as its schedule has in flight.
  const int slots = pipeline_slots(schedule);
  const size_t state_bytes = AdamW::state_bytes_per_element(dtype);
  model_ = std::make_unique<GptModel>(m, config_.train.micro_batch, ops, dtype,
                                      (state_bytes + split.flat_shards - 1) / split.flat_shards, slots, split);
  model_->init_parameters(config_.train.seed);
  optimizer_ = std::make_unique<AdamW>(config_.train, model_->parameters(), ops,
                                       rank_optimizer_groups(config_, layout_, groups));
  steps_ = std::make_unique<StepRunner>(config_, layout_, coordinates_, *backend_, *data_, *model_, *optimizer_,
                                        std::move(schedule));
  RecordOptions recording = record;
  TrainingState resumed;
  if (!resume.empty()) {
    // Sharded values are restored whole; each rank keeps its shards of them.
    WholeValues values(model_->parameters(), backend_->shard_group(), backend_->expert_data_group(), ops);
    resumed = resume_training(resume, config_, *model_, *optimizer_, ops, recording, out_);
    values.keep();
    first_step_ = resumed.step + 1;
  }
  restart_ = record.restart;
  run_name_ = recording.name;

  if (is_first_rank())
    own_plan_ = plan_own_run(config_, layout_, world_.rank(), world_.size(), ops, *model_, *optimizer_,
                             backend_->threads());
  print_start(data_notes.text());
  if (!record.store_path.empty()) start_recording(recording);
  // A link or another user's folder where the checkpoints go stops the run before its first
  // step, not at its first checkpoint.
  if (is_first_rank()) check_run_folder(run_checkpoint_root(config_.train.checkpoint_dir, run_name_));
  RunRecorder* recorder = recorder_.get();
  experts_ = std::make_unique<ExpertBalance>(config_, *model_, ops, world_, recorder);
  alerts_ = std::make_unique<StepAlerts>(config_, world_, ops, *probe_, backend_->places(), recorder, interval_, out_);
  metrics_ = std::make_unique<StepMetrics>(config_, world_, layout_, *probe_, steps_->loss_scaler(), ops.name(),
                                           recorder, *alerts_);
  checkpoints_ = std::make_unique<RunCheckpoints>(config_, layout_, world_, *backend_, *model_, *optimizer_,
                                                  run_name_, resumed.step, recorder, interval_, out_);
  steering_ = std::make_unique<RunSteering>(config_.train, world_, recorder, *alerts_, interval_, out_);
  rewinds_ = std::make_unique<RunRewinds>(config_, world_, *checkpoints_, recorder, out_);
  if (!resume.empty()) {
    restore_training_state(resumed);
    fmt::print(out_, "kiln: resumed from {} at step {}\n", resume, first_step_ - 1);
  }
  // A new run (a fork, another training from an ended run) counts only its own steps.
  if (recorder_ && !recorder_->continued()) step_seconds_ = 0.0;
  std::fflush(out_);
}

void Trainer::start_recording(const RecordOptions& recording) {
  store::RunInfo info;
  info.config_json = config_to_json(config_).dump();
  info.layout = layout_.name();
  info.backend = backend_->ops().device() == Device::Cuda ? "cuda" : "cpu";
  info.device = probe_->device_name();
  info.host = host_name();
  info.pid = getpid();
  std::error_code cwd_error;
  info.workdir = std::filesystem::current_path(cwd_error).string();
  info.world_size = world_.size();
  if (own_plan_) {
    info.planned_step_s = own_plan_->step_s;
    info.planned_memory_bytes = static_cast<int64_t>(own_plan_->planned_bytes);
  }
  recorder_ = std::make_unique<RunRecorder>(recording, info, *probe_);
  run_name_ = recorder_->name();
  if (!recorder_->another_training().empty())
    fmt::print(out_, "kiln: {}, so this training is a new run '{}' (its parent: '{}' at step {}); kiln runs resume {} "
                     "continues that run itself\n",
               recorder_->another_training(), run_name_, recording.name, recording.resumed_step, recording.name);
  std::vector<store::RankPlace> places;
  const std::vector<RankGpu>& rank_places = backend_->places();
  for (size_t r = 0; r < rank_places.size(); ++r) {
    const RankGpu& p = rank_places[r];
    places.push_back({static_cast<int>(r), p.host, p.gpu >= 0 ? fmt::format("cuda:{}", p.gpu) : "cpu", p.pid});
  }
  recorder_->record_ranks(places);
  fmt::print(out_, "kiln: recording run {} '{}' in {}\n", recorder_->run_id(),
             recorder_->name(), recorder_->path());
  if (data_->valid() && config_.train.sample_tokens > 0 && !layout_.splits_model() &&
      !model_->parameters().values_sharded())
    sampler_ = std::make_unique<ValidationSampler>(*model_, data_->tokenizer(), config_.train);
}

Trainer::~Trainer() = default;

double Trainer::scheduled_lr(int64_t step) const {
  return learning_rate(config_.train, step) * steering_->lr_scale();
}

TrainingState Trainer::training_state() const {
  TrainingState state;
  state.optimizer_steps = optimizer_->steps_taken();
  state.consumed_samples = steps_->consumed_samples();
  state.lr_scale = steering_->lr_scale();
  state.loss_scaler = steps_->loss_scaler().state();
  state.expert_bias = experts_->bias();
  state.step_seconds = step_seconds_;
  return state;
}

std::string Trainer::save_checkpoint_at(int64_t step) {
  return checkpoints_->save_checkpoint_at(step, training_state());
}

void Trainer::restore_training_state(const TrainingState& state) {
  steps_->resume_at(state.consumed_samples, state.loss_scaler);
  steering_->restore_lr_scale(state.lr_scale);
  experts_->restore_bias(state.expert_bias);
  // A rewind's abandoned steps, like a restart's lost ones, leave goodput's count.
  step_seconds_ = state.step_seconds;
}

int64_t Trainer::rewind(const std::string& folder, int64_t spike_step, int64_t step) {
  const Checkpoint checkpoint(folder);
  // Sharded values are restored whole; each rank keeps its shards of them.
  WholeValues values(model_->parameters(), backend_->shard_group(), backend_->expert_data_group(), backend_->ops());
  TrainingState state = restore_checkpoint(checkpoint, config_, *model_, *optimizer_, backend_->ops());
  values.keep();
  const SkippedData skipped = skip_after(state.consumed_samples, config_.train.global_batch, config_.alerts.rewind_skip);
  state.consumed_samples = skipped.data_position;
  restore_training_state(state);
  checkpoints_->rewound_to(state.step, folder);
  alerts_->rewound_to(state.step);
  rewinds_->record(spike_step, step, state.step, folder, skipped);
  // The interval's steps were abandoned, and the time it took to come back is no step's.
  interval_.open(Clock::now());
  return state.step;
}

TrainSummary Trainer::run() {
  install_interrupt_handler();
  TrainSummary summary;
  try {
    train_loop(summary);
  } catch (const std::exception& e) {
    // A checkpoint still being written in the background is finished first, and recorded: it
    // may be the one the run resumes from.
    try {
      checkpoints_->finish_writing();
    } catch (const std::exception& unwritten) {
      fmt::print(out_, "kiln: warning: {}\n", unwritten.what());
    }
    if (recorder_) {
      const std::string store_error = recorder_->finish(store::RunStatus::Failed, e.what());
      if (!store_error.empty()) fmt::print(stderr, "kiln: warning: {}\n", store_error);
    }
    throw;
  }
  if (recorder_) {
    const store::RunStatus status = summary.released                        ? store::RunStatus::Released
                                    : summary.interrupted || summary.stopped ? store::RunStatus::Stopped
                                                                             : store::RunStatus::Completed;
    const std::string store_error = recorder_->finish(status);
    if (!store_error.empty()) fmt::print(stderr, "kiln: warning: {}\n", store_error);
  }
  summary.run_name = run_name_;
  summary.last_checkpoint = checkpoints_->last_checkpoint();
  const bool sample =
      config_.train.sample_tokens > 0 && !summary.interrupted && !summary.stopped && !summary.released;
  // Sharded values are whole only a block at a time, in windows.
  const ParameterSet& params = model_->parameters();
  if (sample && (layout_.splits_model() || params.values_sharded())) {
    const std::string share = layout_.splits_model()
                                  ? layout_.model_share()
                                  : fmt::format("1/{} of the weights (parallel.shard=parameters)", params.unit_shards());
    fmt::print(out_, "kiln: no sample: each rank holds {}; {}\n", share,
               summary.last_checkpoint.empty()
                   ? std::string("its last checkpoint could not be written, so there is none to sample from")
                   : "sample its checkpoint with kiln generate --checkpoint " + summary.last_checkpoint);
  } else if (sample && is_first_rank()) {
    const TrainConfig& t = config_.train;
    // As kiln generate writes it: escaped for a terminal, unchanged into a log or a pipe.
    const bool terminal = ::isatty(::fileno(out_)) == 1;
    for (const std::string& prompt : t.sample_prompt.texts) {
      const std::string text =
          generate(*model_, data_->tokenizer(), prompt, t.sample_tokens, t.sample_temperature, t.seed);
      fmt::print(out_, "--- sample (temperature {}) ---\n{}\n---\n", t.sample_temperature,
                 terminal ? terminal_block(text) : text);
    }
  }
  std::fflush(out_);
  return summary;
}

void Trainer::train_loop(TrainSummary& summary) {
  const TrainConfig& t = config_.train;
  const double tokens_per_step = static_cast<double>(t.global_batch) * config_.model.seq_len;
  const bool has_valid = data_->valid() && t.eval_iters > 0;
  Ops& ops = backend_->ops();
  const Clock::time_point start = Clock::now();
  interval_.open(start);

  for (int64_t step = first_step_; step <= t.steps; ++step) {
    // The step's seconds, for goodput: its work from here to the optimizer's update; what the
    // boundary does after it (checkpoints, validation, logging) is not a step's.
    const Clock::time_point step_start = Clock::now();
    backend_->share_machine(step);
    alerts_->before_step(step);
    const bool timed = step % t.log_interval == 0 || step == t.steps;
    const double lr = scheduled_lr(step);
    // The products of this process's first step are the run's: their algorithms are chosen
    // by timing there, once (Ops::tune_products), and the banner's last line says how.
    const bool first = summary.steps == 0;
    if (first && config_.backend.tune_products) ops.tune_products(true);
    StepOutcome outcome = steps_->run(step, timed, lr, out_);
    if (step_seconds_) *step_seconds_ += seconds_since(step_start);
    if (first) {
      ops.tune_products(false);
      print_product_tuning();
      // kiln train --max-restarts reads this line as the restart's end (launch/supervised_run.h).
      if (restart_ > 0) fmt::print(out_, "kiln: restart {}: training again at step {}\n", restart_, step);
    }
    StepTimes& times = outcome.times;
    const OptimizerStep update = outcome.update;
    const double opt_ms = outcome.opt_ms;
    const LossScaler& loss_scaler = steps_->loss_scaler();
    if (update.skipped) {
      fmt::print(out_, "step {}: gradients overflowed at loss scale {:g}; step skipped ({} so "
                       "far), loss scale now {:g}\n",
                 step, outcome.loss_scale, loss_scaler.skipped_steps(), loss_scaler.scale());
    }
    const double norm = update.grad_norm;
    alerts_->after_step(step, times, norm, update.skipped);
    if (!std::isfinite(times.loss)) {
      const std::string message =
          fmt::format("loss is {} at step {}", std::isnan(times.loss) ? "nan" : "infinite", step);
      if (recorder_) recorder_->log_event(store::event_kind::kNan, message, step);
      fail(message);
    }
    ++summary.steps;  // by this process, those a rewind abandoned included

    // The step boundary: a checkpoint written in the background since the last is recorded;
    // then commands, so a step the run stops or pauses after is logged.
    checkpoints_->note_finished_write();
    bool interrupted = interrupt_requested();
    const SteeringDecision decision = steering_->share_decision(
        recorder_ && step < t.steps ? steering_->steer(false) : SteeringDecision{}, interrupted);
    // A loss spike's rewind: where to (every rank learns it), or "" when the run trains on.
    const std::string rewind_to =
        decision.rewind_past > 0 && !decision.stop && !interrupted ? rewinds_->choose(decision.rewind_past, step)
                                                                   : std::string();
    const std::string written =
        decision.checkpoint || decision.stop ? save_checkpoint_at(step) : std::string();
    if (recorder_) steering_->record_steering(step, written);
    const bool logged = timed || decision.stop || decision.pause || interrupted;
    times.a2a_ms = experts_->finish_expert_step(step, logged);
    interval_.add_step(times.loss, times.a2a_ms, times.mtp_losses);
    if (logged) {
      // The next interval starts now, so the cost of reporting this one (printing, handing
      // rows to the store) counts in it and not nowhere.
      const IntervalMeans means = interval_.close(Clock::now());
      const double per_step = means.seconds_per_step;
      summary.train_loss = means.loss;
      // Under expert parallelism the step's time includes the tokens' trips (all-to-all).
      const std::string exchange =
          layout_.ep() > 1 ? fmt::format(" ({:.1f} all-to-all)", means.exchange_ms) : std::string();
      // Multi-token prediction's losses follow the main one, depth by depth.
      std::string depths;
      for (size_t k = 0; k < means.mtp_losses.size(); ++k)
        depths += fmt::format("{}{:.4f}", k == 0 ? " (mtp " : " ", means.mtp_losses[k]);
      if (!depths.empty()) depths += ")";
      fmt::print(out_, "step {:>{}}/{} | loss {:.4f}{} | lr {:.3e} | grad norm {:.3f} | {:.0f} tok/s"
                       " | {:.1f} ms/step{} | ETA {}\n",
                 step, std::to_string(t.steps).size(), t.steps, summary.train_loss, depths, lr, norm,
                 tokens_per_step / per_step, per_step * 1e3, exchange,
                 human_duration(per_step * static_cast<double>(t.steps - step)));
      std::fflush(out_);
      times.mtp_losses = means.mtp_losses;
      if (recorder_ || world_.size() > 1)
        metrics_->record_step(metrics_->metric_row(step, summary.train_loss, lr, norm, per_step, times, opt_ms),
                              step_seconds_);
    }
    // A step the run goes back from is neither validated nor kept.
    const bool abandoned = !rewind_to.empty();
    if (!abandoned && has_valid && t.eval_interval > 0 && (step % t.eval_interval == 0 || step == t.steps))
      validate(step, summary);
    // Every run keeps its last step, whatever the interval: a fine-tune is not lost for want of
    // one. An interval's checkpoint may be written in the background (train.async_checkpoint).
    if (!abandoned && step == t.steps)
      save_checkpoint_at(step);
    else if (!abandoned && t.checkpoint_interval > 0 && step % t.checkpoint_interval == 0)
      checkpoints_->start_checkpoint_at(step, training_state());

    bool stop = decision.stop;
    if (decision.pause && !stop && !interrupted) {
      // A pause may be long: a checkpoint being written is recorded before it.
      checkpoints_->finish_writing();
      stop = steering_->hold_paused(step, interrupted, [this, step] { return save_checkpoint_at(step); });
    }
    if (interrupted) {
      summary.interrupted = true;
      fmt::print(out_, "kiln: interrupted; stopped cleanly after step {}\n", step);
      // The work since the last checkpoint is kept, so kiln runs resume continues from here.
      save_checkpoint_at(step);
      if (recorder_)
        recorder_->log_event(store::event_kind::kStatus, "interrupted (SIGINT or SIGTERM)", step);
      break;
    }
    if (stop && steering_->releasing()) {
      summary.released = true;
      // kiln train says after the run how to continue it, as after Ctrl-C.
      fmt::print(out_, "kiln: released after step {}\n", step);
      break;
    }
    if (stop) {
      summary.stopped = true;
      fmt::print(out_, "kiln: stopped by command after step {}\n", step);
      break;
    }
    if (abandoned) step = rewind(rewind_to, decision.rewind_past, step);
  }
  // Whatever ended the loop, no checkpoint is left half written behind it.
  checkpoints_->finish_writing();
  fmt::print(out_, "kiln: trained {} steps in {}\n", summary.steps,
             human_duration(seconds_since(start)));
}

void Trainer::validate(int64_t step, TrainSummary& summary) {
  const Clock::time_point eval_start = Clock::now();
  std::tie(summary.valid_loss, summary.valid_nats_per_byte) = steps_->evaluate();
  if (sampler_) recorder_->log_samples(sampler_->samples(step));
  interval_.set_aside(seconds_since(eval_start));
  fmt::print(out_,
             "eval step {} | valid loss {:.4f} | {:.3f} bits per token | {:.4f} nats per "
             "byte\n",
             step, *summary.valid_loss, *summary.valid_loss / std::log(2.0), *summary.valid_nats_per_byte);
  std::fflush(out_);
  if (recorder_) recorder_->log_valid(step, *summary.valid_loss);
}

}  // namespace kiln
