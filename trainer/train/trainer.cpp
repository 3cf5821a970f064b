// The Trainer: a run set up from its config (groups, backend, data, model, optimizer, a
// checkpoint to resume, the store), then its loop of steps, validations, checkpoints and
// steering until the last step, a stop or Ctrl-C. Its parts live beside it: trainer_data,
// trainer_step, trainer_pipeline, trainer_metrics, trainer_steering, trainer_checkpoint and
// trainer_banner.
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
#include "trainer/parallel/device_world.h"
#include "trainer/parallel/layout.h"
#include "trainer/train/backend.h"
#include "trainer/train/cuda_graph_choice.h"
#include "trainer/model/flops.h"
#include "trainer/train/generate.h"
#include "trainer/train/interrupt.h"
#include "trainer/plan/rank_build.h"
#include "trainer/util/step_clock.h"

namespace kiln {

namespace {

// Tensor (with sequence), pipeline and data parallelism over the launched processes.
ParallelLayout parallel_layout(const Config& c, int world_size) {
  const ParallelConfig& p = c.parallel;
  const ParallelLayout layout(p, world_size);
  const int64_t per_step = int64_t{c.train.micro_batch} * layout.dp();
  if (c.train.global_batch % per_step != 0)
    fail(fmt::format("train.global_batch={} is not a multiple of train.micro_batch={} x {} "
                     "data-parallel ranks = {}",
                     c.train.global_batch, c.train.micro_batch, layout.dp(), per_step));
  return layout;
}

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
      layout_(parallel_layout(config_, world.size())),
      coordinates_(layout_.coordinates(world.rank())),
      out_(out),
      loss_scaler_(config.precision.dtype == "fp16" ? LossScaler::dynamic() : LossScaler::none()) {
  for (const std::string& warning : fit_to_steps(config_.train)) fmt::print(out_, "kiln: warning: {}\n", warning);
  accum_ = micro_batches_per_step(config_, layout_);
  KILN_CHECK(!config_.data.paths.empty(), "data.paths is empty: name at least one dataset prefix");
  start_backend();
  // Every rank joins its groups, in the same order on all (each split is a collective).
  tensor_group_ = join_group(layout_.tensor_group(world_.rank()));
  data_group_ = join_group(layout_.data_group(world_.rank()));
  pipeline_group_ = join_group(layout_.pipeline_group(world_.rank()));
  if (layout_.cp() > 1) {
    context_group_ = join_group(layout_.context_group(world_.rank()));
    data_context_group_ = join_group(layout_.gradient_group(world_.rank()));
  }
  if (layout_.expert_layout()) {
    expert_group_ = join_group(layout_.expert_group(world_.rank()));
    expert_data_group_ = join_group(layout_.expert_data_group(world_.rank()));
  }
  const int pp = layout_.pp();
  if (pp > 1 && config_.model.tie_embeddings) {
    // The first and last stages of each pipeline keep their two copies of the embedding
    // equal; the stages between are groups of their own.
    const int stage = coordinates_.pp;
    RankCoordinates first = coordinates_, last = coordinates_;
    first.pp = 0;
    last.pp = pp - 1;
    auto group = join_group(stage == 0 || stage == pp - 1
                                  ? std::vector<int>{layout_.rank_of(first), layout_.rank_of(last)}
                                  : std::vector<int>{world_.rank()});
    if (group->size() > 1) embedding_group_ = std::move(group);
  }
  // Before anything is allocated: interleaving refuses a step it cannot schedule.
  if (pp > 1) schedule_ = pipeline_schedule(pp, layout_.vpp(), coordinates_.pp, accum_);
  probe_ = std::make_unique<SystemProbe>(*ops_, gpu_);
  core_share_ = share_cores(config_, *ops_, out_);
  threads_ = resolved_threads(config_.backend);

  const ModelConfig& m = config_.model;
  // What the datasets say about their indices waits for the header: a refusal further on
  // stays one line.
  NoteBuffer data_notes;
  open_data(data_notes.file());

  const DType dtype = compute_dtype(config_.precision, ops_->device());
  RankGroups groups;
  groups.tensor = layout_.tp() > 1 ? tensor_group_.get() : nullptr;
  groups.gradient = &gradient_group();
  groups.pipeline = pipeline_group_.get();
  groups.context = context_group_.get();
  groups.expert = expert_group_.get();
  groups.expert_data = expert_data_group_.get();
  const ModelSplit split = rank_model_split(config_, layout_, groups, coordinates_.pp);
  // A stage holds the activations of as many micro-batches as its schedule has in flight.
  const int slots = pp > 1 ? pipeline_slots(schedule_) : 1;
  const size_t state_bytes = AdamW::state_bytes_per_element(dtype);
  model_ = std::make_unique<GptModel>(m, config_.train.micro_batch, *ops_, dtype,
                                      (state_bytes + split.flat_shards - 1) / split.flat_shards, slots, split);
  model_->init_parameters(config_.train.seed);
  optimizer_ = std::make_unique<AdamW>(config_.train, model_->parameters(), *ops_,
                                       rank_optimizer_groups(config_, layout_, groups));
  if (pp > 1) pipeline_ = std::make_unique<PipelineExecutor>(*model_, *pipeline_group_);
  // Without the distributed optimizer the replicas sum the dense region in buckets during
  // backward; the experts' region is summed over its own replicas after it.
  const ParameterSet& params = model_->parameters();
  if (gradient_group().size() > 1 && !optimizer_->sharded())
    buckets_ = std::make_unique<GradientBuckets>(
        gradient_group(), params.flat_grads().slice(0, params.dense_size()), config_.parallel.ddp_bucket_size);
  // The device communicator matters to the choice only between GPU ranks.
  const bool gpu_ranks = ops_->device() == Device::Cuda && layout_.world() > 1;
  const CudaGraphChoice graphs = choose_cuda_graphs(
      config_, layout_, ops_->device(), gpu_ranks ? resolve_device_comm(config_.parallel.device_comm) : "");
  if (graphs.use) {
    DocumentOptions documents;
    documents.reset_position_ids = config_.data.reset_position_ids;
    documents.reset_attention_mask = config_.data.reset_attention_mask;
    device_step_ = std::make_unique<DeviceStep>(*model_, *optimizer_, *ops_, accum_, documents);
  } else {
    graphs_why_not_ = graphs.why_not;
  }
  RecordOptions recording = record;
  run_name_ = record.name;
  if (!resume.empty()) resume_from(resume, recording);

  if (is_first_rank()) own_plan_ = plan_own_run();
  print_start(data_notes.text());
  model_flops_per_token_ = model_flops_per_token(m);
  peak_flops_ = peak_bf16_flops(ops_->name());
  if (!record.store_path.empty()) {
    store::RunInfo info;
    info.config_json = config_to_json(config_).dump();
    info.layout = layout_.name();
    info.backend = ops_->device() == Device::Cuda ? "cuda" : "cpu";
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
    for (size_t r = 0; r < rank_places_.size(); ++r) {
      const RankGpu& p = rank_places_[r];
      places.push_back({static_cast<int>(r), p.host, p.gpu >= 0 ? fmt::format("cuda:{}", p.gpu) : "cpu", p.pid});
    }
    recorder_->record_ranks(places);
    fmt::print(out_, "kiln: recording run {} '{}' in {}\n", recorder_->run_id(),
               recorder_->name(), recorder_->path());
    if (valid_data_ && config_.train.sample_tokens > 0 && !layout_.splits_model())
      sampler_ = std::make_unique<ValidationSampler>(*model_, *tokenizer_, config_.train);
  }
  // A link or another user's folder where the checkpoints go stops the run before its first
  // step, not at its first checkpoint.
  if (is_first_rank()) check_run_folder(run_checkpoint_root(config_.train.checkpoint_dir, run_name_));
  start_alerts();
  if (!resume.empty())
    fmt::print(out_, "kiln: resumed from {} at step {}\n", resume, first_step_ - 1);
  std::fflush(out_);
}

Trainer::~Trainer() = default;

double Trainer::scheduled_lr(int64_t step) const {
  return learning_rate(config_.train, step) * lr_scale_;
}

void Trainer::share_machine(int64_t step) {
  if (!core_share_) return;
  const int threads = core_share_->threads();
  if (threads != threads_) {
    threads_ = threads;
    ops_->limit_threads(threads);
  }
  // The threads follow every count; the output only a change that lasts (ShareNotice).
  if (!core_share_->say_share()) return;
  const std::string who = core_share_->runs() == 1
                              ? std::string("no other CPU run here now")
                              : fmt::format("{} CPU runs share this machine's {} cores", core_share_->runs(),
                                            core_share_->cores());
  fmt::print(out_, "kiln: {}: step {} on {} thread{}\n", who, step, threads, threads == 1 ? "" : "s");
}

std::string Trainer::checkpoint_not_written(int64_t step, const std::string& why) {
  const std::string warning = checkpoint_failures_.failed(step, why, config_.train.checkpoint_failures);
  fmt::print(out_, "kiln: warning: {}\n", warning);
  std::fflush(out_);
  if (recorder_) recorder_->log_event(store::event_kind::kError, warning, step);
  return {};
}

TrainSummary Trainer::run() {
  install_interrupt_handler();
  TrainSummary summary;
  try {
    train_loop(summary);
  } catch (const std::exception& e) {
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
  summary.last_checkpoint = last_checkpoint_;
  const bool sample =
      config_.train.sample_tokens > 0 && !summary.interrupted && !summary.stopped && !summary.released;
  if (sample && layout_.splits_model()) {
    fmt::print(out_, "kiln: no sample: each rank holds {}; {}\n", layout_.model_share(),
               last_checkpoint_.empty()
                   ? std::string("its last checkpoint could not be written, so there is none to sample from")
                   : "sample its checkpoint with kiln generate --checkpoint " + last_checkpoint_);
  } else if (sample && is_first_rank()) {
    const TrainConfig& t = config_.train;
    const std::string text = generate(*model_, *tokenizer_, t.sample_prompt, t.sample_tokens,
                                      t.sample_temperature, t.seed);
    // As kiln generate writes it: escaped for a terminal, unchanged into a log or a pipe.
    const bool terminal = ::isatty(::fileno(out_)) == 1;
    fmt::print(out_, "--- sample (temperature {}) ---\n{}\n---\n", t.sample_temperature,
               terminal ? terminal_block(text) : text);
  }
  std::fflush(out_);
  return summary;
}

void Trainer::train_loop(TrainSummary& summary) {
  const TrainConfig& t = config_.train;
  const double tokens_per_step = static_cast<double>(t.global_batch) * config_.model.seq_len;
  const bool has_valid = valid_data_ && t.eval_iters > 0;
  const Clock::time_point start = Clock::now();
  Clock::time_point interval_start = start;
  double interval_loss = 0, interval_exchange_ms = 0;
  int64_t interval_steps = 0;

  for (int64_t step = first_step_; step <= t.steps; ++step) {
    share_machine(step);
    before_step(step);
    const bool timed = step % t.log_interval == 0 || step == t.steps;
    const double lr = scheduled_lr(step);
    // The products of this process's first step are the run's: their algorithms are chosen
    // by timing there, once (Ops::tune_products), and the banner's last line says how.
    const bool first = step == first_step_;
    if (first && config_.backend.tune_products) ops_->tune_products(true);
    const double scale = loss_scaler_.scale();
    StepOutcome outcome = run_step(step, timed, lr);
    if (first) {
      ops_->tune_products(false);
      print_product_tuning();
    }
    consumed_samples_ += t.global_batch;
    StepTimes& times = outcome.times;
    const OptimizerStep update = outcome.update;
    const double opt_ms = outcome.opt_ms;
    loss_scaler_.update(update.skipped);
    model_->update_fp8_scales();
    if (update.skipped) {
      fmt::print(out_, "step {}: gradients overflowed at loss scale {:g}; step skipped ({} so "
                       "far), loss scale now {:g}\n",
                 step, scale, loss_scaler_.skipped_steps(), loss_scaler_.scale());
    }
    const double norm = update.grad_norm;
    after_step(step, times, norm, update.skipped);
    if (!std::isfinite(times.loss)) {
      const std::string message =
          fmt::format("loss is {} at step {}", std::isnan(times.loss) ? "nan" : "infinite", step);
      if (recorder_) recorder_->log_event(store::event_kind::kNan, message, step);
      fail(message);
    }
    interval_loss += times.loss;
    ++interval_steps;
    summary.steps = step - first_step_ + 1;

    // The step boundary: commands first, so a step the run stops or pauses after is logged.
    bool interrupted = interrupt_requested();
    const SteeringDecision decision = share_decision(
        recorder_ && step < t.steps ? steer(false) : SteeringDecision{}, interrupted);
    const std::string written =
        decision.checkpoint || decision.stop ? save_checkpoint_at(step) : std::string();
    if (recorder_) record_steering(step, written);
    const bool logged = timed || decision.stop || decision.pause || interrupted;
    times.a2a_ms = finish_expert_step(step, logged);
    interval_exchange_ms += times.a2a_ms;
    if (logged) {
      // The next interval starts now, so the cost of reporting this one (printing, handing
      // rows to the store) counts in it and not nowhere.
      const Clock::time_point now = Clock::now();
      const double elapsed =
          std::chrono::duration<double>(now - interval_start).count() - not_training_s_;
      const double per_step = elapsed / static_cast<double>(interval_steps);
      summary.train_loss = interval_loss / static_cast<double>(interval_steps);
      interval_start = now;
      // Under expert parallelism the step's time includes the tokens' trips (all-to-all).
      const std::string exchange =
          layout_.ep() > 1
              ? fmt::format(" ({:.1f} all-to-all)", interval_exchange_ms / static_cast<double>(interval_steps))
              : std::string();
      fmt::print(out_, "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:.0f} tok/s"
                       " | {:.1f} ms/step{} | ETA {}\n",
                 step, std::to_string(t.steps).size(), t.steps, summary.train_loss, lr, norm,
                 tokens_per_step / per_step, per_step * 1e3, exchange,
                 human_duration(per_step * static_cast<double>(t.steps - step)));
      interval_loss = 0;
      interval_exchange_ms = 0;
      not_training_s_ = 0;
      interval_steps = 0;
      std::fflush(out_);
      if (recorder_ || world_.size() > 1)
        record_step(metric_row(step, summary.train_loss, lr, norm, per_step, times, opt_ms));
    }
    if (has_valid && t.eval_interval > 0 && (step % t.eval_interval == 0 || step == t.steps)) {
      const Clock::time_point eval_start = Clock::now();
      std::tie(summary.valid_loss, summary.valid_nats_per_byte) = evaluate();
      if (sampler_) recorder_->log_sample(sampler_->sample(step));
      not_training_s_ += seconds_since(eval_start);
      fmt::print(out_,
                 "eval step {} | valid loss {:.4f} | {:.3f} bits per token | {:.4f} nats per "
                 "byte\n",
                 step, *summary.valid_loss, *summary.valid_loss / std::log(2.0),
                 *summary.valid_nats_per_byte);
      std::fflush(out_);
      if (recorder_) recorder_->log_valid(step, *summary.valid_loss);
    }
    // Every run keeps its last step, whatever the interval: a fine-tune is not lost for want of one.
    if (step == t.steps || (t.checkpoint_interval > 0 && step % t.checkpoint_interval == 0)) save_checkpoint_at(step);

    bool stop = decision.stop;
    releasing_ = releasing_ || decision.release;
    if (decision.pause && !stop && !interrupted) stop = hold_paused(step, interrupted);
    if (interrupted) {
      summary.interrupted = true;
      fmt::print(out_, "kiln: interrupted; stopped cleanly after step {}\n", step);
      // The work since the last checkpoint is kept, so kiln runs resume continues from here.
      save_checkpoint_at(step);
      if (recorder_)
        recorder_->log_event(store::event_kind::kStatus, "interrupted (SIGINT or SIGTERM)", step);
      break;
    }
    if (stop && releasing_) {
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
  }
  fmt::print(out_, "kiln: trained {} steps in {}\n", summary.steps,
             human_duration(seconds_since(start)));
}

}  // namespace kiln
