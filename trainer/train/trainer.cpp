#include "trainer/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <tuple>

#include <fmt/core.h>

#include "kernels/check.h"
#include "store/user_text.h"
#include "trainer/data/blended_dataset.h"
#include "trainer/data/data_presence.h"
#include "trainer/data/tokenizer.h"
#include "trainer/parallel/layout.h"
#include "trainer/parallel/wait_limits.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/whole_tensors.h"
#include "trainer/train/backend.h"
#include "trainer/train/flops.h"
#include "trainer/train/generate.h"
#include "trainer/train/interrupt.h"
#include "trainer/util/human_format.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

DType compute_dtype(const PrecisionConfig& precision) {
  if (precision.dtype == "bf16") return DType::BF16;
  if (precision.dtype == "fp16") return DType::F16;
  return DType::F32;
}

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

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "";
}

double ms_since(Clock::time_point start) { return seconds_since(start) * 1e3; }

constexpr auto kPausePoll = std::chrono::milliseconds(200);

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
  accum_ = config_.train.global_batch / (config_.train.micro_batch * layout_.dp());
  KILN_CHECK(!config_.data.paths.empty(), "data.paths is empty: name at least one dataset prefix");
  ops_ = make_ops(config_);
  if (world_.size() > 1 && ops_->device() == Device::Cuda)
    fail("parallelism across GPUs needs the NCCL communicator, which is not in this build "
         "yet; on the GPU, train on one process");
  // Every rank joins its groups, in the same order on all (each split is a collective).
  tensor_group_ = world_.split(layout_.tensor_group(world_.rank()));
  data_group_ = world_.split(layout_.data_group(world_.rank()));
  pipeline_group_ = world_.split(layout_.pipeline_group(world_.rank()));
  const int pp = layout_.pp();
  if (pp > 1 && config_.model.tie_embeddings) {
    // The first and last stages of each pipeline keep their two copies of the embedding
    // equal; the stages between are groups of their own.
    const int stage = coordinates_.pp;
    RankCoordinates first = coordinates_, last = coordinates_;
    first.pp = 0;
    last.pp = pp - 1;
    auto group = world_.split(stage == 0 || stage == pp - 1
                                  ? std::vector<int>{layout_.rank_of(first), layout_.rank_of(last)}
                                  : std::vector<int>{world_.rank()});
    if (group->size() > 1) embedding_group_ = std::move(group);
  }
  // Before anything is allocated: interleaving refuses a step it cannot schedule.
  if (pp > 1) schedule_ = pipeline_schedule(pp, layout_.vpp(), coordinates_.pp, accum_);
  probe_ = std::make_unique<SystemProbe>(*ops_);

  const ModelConfig& m = config_.model;
  check_data_present(config_.data);
  tokenizer_ = load_tokenizer(config_.data.tokenizer);
  const int32_t tokenizer_ids = tokenizer_->vocab_size();
  if (m.vocab_size < tokenizer_ids)
    fail(fmt::format("model.vocab_size={} is smaller than the tokenizer's {} ids (data.tokenizer={})",
                     m.vocab_size, tokenizer_ids, config_.data.tokenizer));
  token_bytes_ = text_bytes_per_id(*tokenizer_, m.vocab_size);
  // Megatron's sample counts: every step's global batch; validation reads the same first
  // eval_iters micro-batches each time, so its losses compare across the run.
  const TrainConfig& tc = config_.train;
  GptDatasetSpec spec;
  spec.split = config_.data.split;
  spec.seq_len = m.seq_len;
  spec.seed = tc.seed;
  spec.cache_dir = config_.data.cache_dir;
  spec.num_samples = static_cast<int64_t>(tc.steps) * tc.global_batch;
  // What the datasets say about their indices waits for the header: a refusal further on
  // stays one line.
  NoteBuffer data_notes;
  train_data_ = open_samples(config_.data.paths, spec, data_notes.file());
  if (config_.data.split_fractions()[1] > 0 && tc.eval_iters > 0) {
    spec.which = Split::Valid;
    spec.num_samples = static_cast<int64_t>(tc.eval_iters) * tc.micro_batch;
    valid_data_ = open_samples(config_.data.paths, spec, data_notes.file());
  }
  for (const SampleSource* data : {train_data_.get(), valid_data_.get()}) {
    if (data && data->max_token_id() >= m.vocab_size)
      fail(fmt::format("data: token id {} in {} is outside model.vocab_size={}",
                       data->max_token_id(), data->describe(), m.vocab_size));
  }
  batch_ = std::make_unique<TokenBatch>(DocumentOptions{
      tokenizer_->eod(), config_.data.eod_mask_loss, config_.data.reset_position_ids,
      config_.data.reset_attention_mask});

  const DType dtype = compute_dtype(config_.precision);
  // The distributed optimizer keeps 1/dp of the state on each rank.
  const int shards = config_.parallel.distributed_optimizer ? layout_.dp() : 1;
  const size_t state_bytes = AdamW::state_bytes_per_element(dtype);
  Communicator* tensor = layout_.tp() > 1 ? tensor_group_.get() : nullptr;
  // A stage holds the activations of as many micro-batches as its schedule has in flight.
  const int slots = pp > 1 ? pipeline_slots(schedule_) : 1;
  model_ = std::make_unique<GptModel>(
      m, config_.train.micro_batch, *ops_, dtype, (state_bytes + shards - 1) / shards, slots,
      ModelSplit{parse_recompute(config_.train.recompute), tensor, shards,
                 config_.parallel.sequence_parallel, stage_chunks()});
  model_->init_parameters(config_.train.seed);
  optimizer_ = std::make_unique<AdamW>(config_.train, model_->parameters(), *ops_,
                                       shards > 1 ? data_group_.get() : nullptr, tensor,
                                       pp > 1 ? pipeline_group_.get() : nullptr);
  if (pp > 1) pipeline_ = std::make_unique<PipelineExecutor>(*model_, *pipeline_group_);
  if (layout_.dp() > 1 && !optimizer_->sharded())
    buckets_ = std::make_unique<GradientBuckets>(*data_group_, model_->parameters().flat_grads(),
                                                 config_.parallel.ddp_bucket_size);
  RecordOptions recording = record;
  run_name_ = record.name;
  if (!resume.empty()) {
    const Checkpoint checkpoint(resume);
    checkpoint.check_model(config_to_json(config_)["model"]);
    const TrainingState& state = checkpoint.state();
    if (state.step >= config_.train.steps)
      fail(fmt::format("checkpoint {} is at step {}, and train.steps={} leaves nothing to train; "
                       "raise train.steps",
                       resume, state.step, config_.train.steps));
    checkpoint.restore(*model_, *optimizer_, *ops_);
    first_step_ = state.step + 1;
    saved_step_ = state.step;
    consumed_samples_ = state.consumed_samples;
    lr_scale_ = state.lr_scale;
    loss_scaler_.restore(state.loss_scaler);
    warn_of_schedule_changes(state.config, resume);
    // The run goes on under its own name (and in its own checkpoint folder) unless the user
    // names a new one: a fork of the run.
    if (!record.name_given) {
      try {
        store::check_run_name(state.run_name);
      } catch (const Error& e) {
        fail("checkpoint " + resume + " records a run name kiln cannot use as a folder (" + e.what() +
             "); resume it with --name NAME");
      }
      run_name_ = recording.name = state.run_name;
    }
    recording.resumed_from = resume;
  }

  const TrainConfig& t = config_.train;
  // Each pipeline stage holds its own layers' parameters.
  double parameters = static_cast<double>(model_->parameters().whole_count());
  pipeline_group_->all_reduce(Tensor{&parameters, DType::F64, {1}}, ReduceOp::Sum);
  fmt::print(out_, "kiln: {} model, {} layers, d_model {}, {} heads ({} kv), {:.2f}M parameters, "
                   "vocab {} (padded {}), seq_len {}\n",
             m.arch, m.n_layer, m.d_model, m.n_head, m.kv_heads(), parameters / 1e6, m.vocab_size,
             m.padded_vocab(), m.seq_len);
  fmt::print(out_, "kiln: {}, {}; global batch {} = {} micro-batches of {}{}, {} tokens a step, {} "
                   "steps\n",
             ops_->name(), config_.precision.dtype, t.global_batch, accum_, t.micro_batch,
             layout_.dp() > 1 ? fmt::format(" on each of {} data-parallel ranks", layout_.dp())
                                : std::string(),
             static_cast<int64_t>(t.global_batch) * m.seq_len, t.steps);
  if (layout_.tp() > 1)
    fmt::print(out_, "kiln: tensor-parallel over {} ranks: each holds {} of {} heads, {} of {} "
                     "hidden units and {} of {} vocabulary rows{}\n",
               layout_.tp(), m.n_head / layout_.tp(), m.n_head, m.ffn_dim() / layout_.tp(),
               m.ffn_dim(), m.padded_vocab() / layout_.tp(), m.padded_vocab(),
               config_.parallel.sequence_parallel
                   ? fmt::format(", and {} of {} tokens a sequence between them (sequence "
                                 "parallel)",
                                 m.seq_len / layout_.tp(), m.seq_len)
                   : std::string());
  if (pp > 1) print_pipeline();
  fmt::print(out_, "{}kiln: data {}\n", data_notes.text(), train_data_->describe());
  if (valid_data_) fmt::print(out_, "kiln: data {}\n", valid_data_->describe());
  std::string memory = "kiln: memory";
  size_t total = optimizer_->bytes();
  for (const ArenaSize& a : model_->memory()) {
    memory += fmt::format(" {} {} |", a.name, human_bytes(a.bytes));
    total += a.bytes;
  }
  fmt::print(out_, "{} optimizer {} | total {}\n", memory, human_bytes(optimizer_->bytes()),
             human_bytes(total));
  if (optimizer_->sharded())
    fmt::print(out_, "kiln: distributed optimizer: each of {} data-parallel ranks keeps 1/{} of "
                     "the optimizer state\n",
               layout_.dp(), layout_.dp());
  if (config_.train.recompute != "none")
    fmt::print(out_, "kiln: recomputing {} in backward (train.recompute={})\n",
               config_.train.recompute == "full" ? "each block from its input"
                                                 : "the attention core",
               config_.train.recompute);

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
    recorder_ = std::make_unique<RunRecorder>(recording, info, *probe_);
    run_name_ = recorder_->name();
    fmt::print(out_, "kiln: recording run {} '{}' in {}\n", recorder_->run_id(),
               recorder_->name(), recorder_->path());
    if (valid_data_ && t.sample_tokens > 0 && layout_.tp() == 1 && layout_.pp() == 1)
      sampler_ = std::make_unique<ValidationSampler>(*model_, *tokenizer_, t);
  }
  if (!resume.empty())
    fmt::print(out_, "kiln: resumed from {} at step {}\n", resume, first_step_ - 1);
  std::fflush(out_);
}

Trainer::~Trainer() = default;

void Trainer::fill_batch(const SampleSource& data, int64_t first_sample, int slot) {
  const int64_t B = config_.train.micro_batch, T = config_.model.seq_len;
  batch_->fill(data, first_sample, B, static_cast<int>(T));
  model_->set_batch(batch_->tokens(), batch_->targets(), B, T, slot,
                    {batch_->positions(), batch_->attention_starts()});
}

void Trainer::warn_of_schedule_changes(const nlohmann::json& checkpoint_config, const std::string& resume) {
  TrainConfig before;
  try {
    before = config_from_json(checkpoint_config).train;
  } catch (const Error&) {
    return;  // a config older kiln wrote and this one refuses: nothing to compare with
  }
  fit_to_steps(before);
  const std::vector<std::string> changes = schedule_changes(before, config_.train);
  if (changes.empty()) return;
  std::string list;
  for (const std::string& change : changes) list += (list.empty() ? "" : ", ") + change;
  fmt::print(out_, "kiln: warning: resuming {} with a changed schedule ({}): the learning rate at step {} is {:.3g}, "
                   "where the checkpoint's schedule had {:.3g}\n",
             resume, list, first_step_, learning_rate(config_.train, first_step_) * lr_scale_,
             learning_rate(before, first_step_) * lr_scale_);
}

std::vector<PipelineChunk> Trainer::virtual_stages() const {
  const int pp = layout_.pp(), vpp = layout_.vpp(), stages = pp * vpp;
  const ParallelConfig& p = config_.parallel;
  const std::vector<int> layers =
      pipeline_layers(config_.model.n_layer, pp, vpp, p.first_stage_layers, p.last_stage_layers);
  std::vector<PipelineChunk> chunks;
  int first_layer = 0;
  for (int v = 0; v < stages; ++v) {
    const int n = layers[static_cast<size_t>(v)];
    chunks.push_back({first_layer, first_layer + n, v == 0, v == stages - 1});
    first_layer += n;
  }
  return chunks;
}

std::vector<PipelineChunk> Trainer::stage_chunks() const {
  const int pp = layout_.pp();
  if (pp == 1) return {};
  // Virtual stage v is chunk v / pp of stage v mod pp.
  std::vector<PipelineChunk> chunks;
  const std::vector<PipelineChunk> all = virtual_stages();
  for (size_t v = 0; v < all.size(); ++v)
    if (static_cast<int>(v) % pp == coordinates_.pp) chunks.push_back(all[v]);
  return chunks;
}

void Trainer::print_pipeline() const {
  const int pp = layout_.pp(), vpp = layout_.vpp();
  const ParallelConfig& p = config_.parallel;
  std::string stages;
  const std::vector<PipelineChunk> all = virtual_stages();
  for (size_t v = 0; v < all.size(); ++v) {
    const PipelineChunk& c = all[v];
    const std::string held =
        c.layers() == 1 ? fmt::format("layer {}", c.first_layer)
                        : fmt::format("layers {}-{}", c.first_layer, c.end_layer - 1);
    stages += fmt::format("{}{} {}: {}{}{}", v == 0 ? "" : ", ", vpp > 1 ? "virtual stage" : "stage",
                          v, held, c.embedding ? " + embedding" : "", c.head ? " + head" : "");
  }
  fmt::print(out_, "kiln: pipeline of {} stages{}, {} schedule over {} micro-batches: bubble "
                   "{:.1f}% of each step; {}{}\n",
             pp, vpp > 1 ? fmt::format(" x {} virtual", vpp) : std::string(),
             vpp > 1 ? "interleaved 1F1B" : "1F1B", accum_,
             100.0 * pipeline_bubble(pp, vpp, accum_), stages,
             vpp > 1 ? fmt::format(" (virtual stage v on stage v mod {})", pp) : std::string());
  if (p.first_stage_layers > 0 || p.last_stage_layers > 0)
    fmt::print(out_, "kiln: uneven pipeline split: parallel.first_stage_layers={}, "
                     "parallel.last_stage_layers={}\n",
               p.first_stage_layers, p.last_stage_layers);
}

double Trainer::scheduled_lr(int64_t step) const {
  return learning_rate(config_.train, step) * lr_scale_;
}

StepTimes Trainer::train_step(bool timed) {
  const int accum = accum_;
  const int64_t B = config_.train.micro_batch;
  // This replica's slice of the step's global batch (a tensor group's ranks read the same).
  const int64_t first = consumed_samples_ + coordinates_.dp * int64_t{accum} * B;
  const double tokens_per_step =
      static_cast<double>(config_.train.global_batch) * config_.model.seq_len;
  // On a logged step each phase waits for the device, so the host clock times the device.
  const auto phase_end = [&] {
    if (timed) ops_->synchronize();
  };
  StepTimes times;
  model_->zero_grad();
  if (layout_.pp() > 1) {
    pipeline_step(first, phase_end, times);
    // The tied embedding's copies are summed over the first and last stages once each has
    // its replicas' sum (Megatron's order): the buckets write the sums in place, the
    // distributed optimizer into shards of its own, so it takes the copies summed first.
    const bool sharded = optimizer_->sharded();
    if (sharded) sum_tied_embedding(times);
    if (layout_.dp() > 1) reduce_gradients(times);
    if (!sharded) sum_tied_embedding(times);
    return times;
  }
  for (int micro = 0; micro < accum; ++micro) {
    Clock::time_point t0 = Clock::now();
    fill_batch(*train_data_, first + micro * B);
    phase_end();
    times.data_ms += ms_since(t0);
    t0 = Clock::now();
    times.loss += model_->forward() / accum;
    phase_end();
    times.fwd_ms += ms_since(t0);
    t0 = Clock::now();
    // The last micro-batch's backward finishes the step's gradients, layer by layer: each
    // bucket's reduction over the data-parallel ranks starts as its layers are done.
    if (buckets_ && micro == accum - 1)
      model_->backward(loss_scaler_.scale() / tokens_per_step, 0,
                       [this](int64_t ready) { buckets_->ready(ready); });
    else
      model_->backward(loss_scaler_.scale() / tokens_per_step);
    phase_end();
    times.bwd_ms += ms_since(t0);
  }
  if (layout_.dp() > 1) reduce_gradients(times);
  return times;
}

void Trainer::pipeline_step(int64_t first_sample, const std::function<void()>& phase_end,
                            StepTimes& times) {
  const int64_t B = config_.train.micro_batch;
  const double tokens_per_step =
      static_cast<double>(config_.train.global_batch) * config_.model.seq_len;
  const PipelineTimes pipeline = pipeline_->run(
      schedule_, loss_scaler_.scale() / tokens_per_step,
      [&](int micro, int slot) { fill_batch(*train_data_, first_sample + micro * B, slot); },
      [&](int, int, double loss) { times.loss += loss / accum_; }, phase_end,
      // The data-parallel reduction of each bucket starts as the last micro-batch's
      // backward finishes it, during the pipeline's cool-down.
      buckets_ ? std::function<void(int64_t)>([this](int64_t ready) { buckets_->ready(ready); })
               : nullptr);
  times.data_ms = pipeline.data_ms;
  times.fwd_ms = pipeline.fwd_ms;
  times.bwd_ms = pipeline.bwd_ms;
  const Clock::time_point start = Clock::now();
  // The loss is the last stage's; every stage reports it.
  pipeline_group_->all_reduce(Tensor{&times.loss, DType::F64, {1}}, ReduceOp::Sum);
  times.comm_ms += ms_since(start);
}

void Trainer::sum_tied_embedding(StepTimes& times) {
  if (!embedding_group_) return;
  const Clock::time_point start = Clock::now();
  // The output layer's copy of the embedding took the head's gradient, the embedding the
  // input's: both copies take the sum, so they stay equal.
  embedding_group_->all_reduce(model_->parameters().find("wte").grad, ReduceOp::Sum);
  times.comm_ms += ms_since(start);
}

void Trainer::reduce_gradients(StepTimes& times) {
  const Clock::time_point start = Clock::now();
  // Each rank's backward weighted its tokens by 1 / (the global batch's tokens), so the sum
  // over ranks is the global batch's gradient, as one process computes it. What is left of
  // the reduction after backward is the exposed communication.
  if (optimizer_->sharded()) {
    optimizer_->reduce_scatter_gradients();
  } else {
    buckets_->finish();
  }
  double loss = times.loss;
  data_group_->all_reduce(Tensor{&loss, DType::F64, {1}}, ReduceOp::Sum);
  times.loss = loss / layout_.dp();
  times.comm_ms += ms_since(start);
}

void Trainer::record_step(store::MetricRow row) {
  const MemoryReading memory = probe_->memory();
  row.mem_used = memory.used;
  row.mem_peak = memory.peak;
  if (world_.size() == 1) {
    recorder_->log_step(row);
    return;
  }
  // What differs between ranks travels; step, loss, lr and grad norm are the same on all.
  double mine[] = {row.tokens_per_s, row.tflops, row.mfu, row.fwd_ms, row.bwd_ms, row.opt_ms,
                   row.comm_ms, row.data_ms, static_cast<double>(*row.mem_used),
                   static_cast<double>(*row.mem_peak)};
  constexpr int64_t kFields = std::size(mine);
  std::vector<double> all(static_cast<size_t>(kFields * world_.size()));
  world_.gather(Tensor{all.data(), DType::F64, {static_cast<int64_t>(all.size())}},
                Tensor{mine, DType::F64, {kFields}}, 0);
  if (!recorder_) return;
  for (int r = 0; r < world_.size(); ++r) {
    const double* v = all.data() + r * kFields;
    row.rank = r;
    row.tokens_per_s = v[0];
    row.tflops = v[1];
    row.mfu = v[2];
    row.fwd_ms = v[3];
    row.bwd_ms = v[4];
    row.opt_ms = v[5];
    row.comm_ms = v[6];
    row.data_ms = v[7];
    row.mem_used = static_cast<int64_t>(v[8]);
    row.mem_peak = static_cast<int64_t>(v[9]);
    recorder_->log_step(row);
  }
}

std::pair<double, double> Trainer::evaluate() {
  const int64_t B = config_.train.micro_batch;
  double loss = 0, nats = 0;
  int64_t bytes = 0;
  const int iters = config_.train.eval_iters;
  if (layout_.pp() > 1) {
    pipeline_->run(
        pipeline_forwards(layout_.vpp(), iters), 0.0,
        [&](int micro, int slot) {
          fill_batch(*valid_data_, micro * B, slot);
          bytes += batch_->target_text_bytes(token_bytes_);
        },
        [&](int, int slot, double batch_loss) {
          loss += batch_loss;
          nats += batch_loss * static_cast<double>(model_->target_count(slot));
        });
    // The losses are the last stage's.
    double sums[] = {loss, nats};
    pipeline_group_->all_reduce(Tensor{sums, DType::F64, {2}}, ReduceOp::Sum);
    loss = sums[0];
    nats = sums[1];
  } else {
    for (int64_t i = 0; i < iters; ++i) {
      fill_batch(*valid_data_, i * B);
      const double batch_loss = model_->forward();
      loss += batch_loss;
      nats += batch_loss * static_cast<double>(model_->target_count());
      bytes += batch_->target_text_bytes(token_bytes_);
    }
  }
  return {loss / static_cast<double>(config_.train.eval_iters),
          nats / static_cast<double>(std::max<int64_t>(bytes, 1))};
}

store::MetricRow Trainer::metric_row(int64_t step, double loss, double lr, double grad_norm,
                                     double seconds_per_step, const StepTimes& times,
                                     double opt_ms) const {
  const int64_t tokens_per_step = static_cast<int64_t>(config_.train.global_batch) * config_.model.seq_len;
  store::MetricRow row;
  row.step = step;
  row.rank = world_.rank();
  row.tokens = step * tokens_per_step;
  row.loss = loss;
  row.lr = lr;
  row.grad_norm = grad_norm;
  row.tokens_per_s = static_cast<double>(tokens_per_step) / seconds_per_step;
  row.tflops = row.tokens_per_s * static_cast<double>(model_flops_per_token_) / 1e12;
  if (peak_flops_ > 0) row.mfu = utilisation(row.tokens_per_s, model_flops_per_token_, peak_flops_);
  row.fwd_ms = times.fwd_ms;
  row.bwd_ms = times.bwd_ms;
  row.opt_ms = opt_ms;
  row.comm_ms = times.comm_ms;
  row.data_ms = times.data_ms;
  if (config_.precision.dtype == "fp16") row.loss_scale = loss_scaler_.scale();
  row.skipped_steps = loss_scaler_.skipped_steps();
  return row;
}

std::string Trainer::apply_setting(const Setting& setting) {
  TrainConfig& t = config_.train;
  if (setting.key == "train.lr") {
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

std::string Trainer::save_checkpoint_at(int64_t step) {
  const std::string root = run_checkpoint_root(config_.train.checkpoint_dir, run_name_);
  if (saved_step_ == step) return (std::filesystem::path(root) / fmt::format("step-{:08d}", step)).string();
  const Clock::time_point start = Clock::now();
  // The replicas hold the same model; the optimizer state, when sharded, is gathered to the
  // first rank, which writes it all.
  const OptimizerState optimizer = optimizer_->state_for_checkpoint();
  saved_step_ = step;
  // A model split over a tensor group or pipeline stages is written whole: the first
  // replica's tensor groups gather their pieces, and its stages send theirs to the first.
  const bool split = layout_.tp() > 1 || layout_.pp() > 1;
  WholeTensors whole;
  if (split && data_group_->rank() == 0) {
    whole = gather_whole_tensors(*model_, optimizer, *ops_, *tensor_group_);
    if (layout_.pp() > 1 && tensor_group_->rank() == 0)
      gather_pipeline_stages(whole, *pipeline_group_);
  }
  if (!is_first_rank()) return {};
  TrainingState state;
  state.step = step;
  state.optimizer_steps = optimizer_->steps_taken();
  state.consumed_samples = consumed_samples_;
  state.seed = config_.train.seed;
  state.lr_scale = lr_scale_;
  state.loss_scaler = loss_scaler_.state();
  state.run_name = run_name_;
  state.layout = layout_.name();
  state.config = config_to_json(config_);
  const int keep = config_.train.checkpoint_keep;
  const WrittenCheckpoint written =
      split ? write_checkpoint(root, state, whole.model_sources(), whole.optimizer_sources(), keep)
            : save_checkpoint(root, state, *model_, optimizer, *ops_, keep);
  const double seconds = seconds_since(start);
  not_training_s_ += seconds;
  fmt::print(out_, "kiln: saved checkpoint {} ({}) in {:.1f} s\n", written.path,
             human_bytes(static_cast<uint64_t>(written.bytes)), seconds);
  std::fflush(out_);
  if (recorder_) recorder_->log_checkpoint(step, written.path, written.bytes, state.layout);
  return written.path;
}

SteeringDecision Trainer::steer(bool paused) {
  steering_pending_ = recorder_->pending_commands();
  if (steering_pending_.empty()) return {};
  steering_ = decide(steering_pending_, paused);
  for (size_t i = 0; i < steering_.settings.size(); ++i) {
    std::string& reason = steering_.outcomes[steering_.setting_outcome[i]].reason;
    reason += ": " + apply_setting(steering_.settings[i]);
  }
  return steering_;
}

void Trainer::record_steering(int64_t step, const std::string& checkpoint_path) {
  if (steering_pending_.empty()) return;
  const std::vector<store::Command> pending = std::move(steering_pending_);
  steering_pending_.clear();
  for (size_t i = 0; i < pending.size(); ++i) {
    const auto action = pending[i].action;
    CommandOutcome& o = steering_.outcomes[i];
    if (o.applied && !checkpoint_path.empty() &&
        (action == store::CommandAction::Checkpoint || action == store::CommandAction::Stop))
      o.reason += "; wrote " + checkpoint_path;
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

SteeringDecision Trainer::share_decision(SteeringDecision decision, bool& interrupted) {
  if (world_.size() == 1) return decision;
  // What the step boundary decided, and the settings it may have changed, as rank 0 has
  // them; small integers travel exactly as doubles.
  TrainConfig& t = config_.train;
  double control[] = {static_cast<double>(decision.pause),
                      static_cast<double>(decision.resume),
                      static_cast<double>(decision.stop),
                      static_cast<double>(decision.checkpoint),
                      static_cast<double>(interrupted),
                      static_cast<double>(t.log_interval),
                      static_cast<double>(t.eval_interval),
                      lr_scale_};
  world_.broadcast(Tensor{control, DType::F64, {std::size(control)}}, 0);
  decision.pause = control[0] != 0;
  decision.resume = control[1] != 0;
  decision.stop = control[2] != 0;
  decision.checkpoint = control[3] != 0;
  interrupted = control[4] != 0;
  t.log_interval = static_cast<int>(control[5]);
  t.eval_interval = static_cast<int>(control[6]);
  lr_scale_ = control[7];
  return decision;
}

SteeringDecision Trainer::wait_while_paused(int64_t step) {
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

bool Trainer::hold_paused(int64_t step, bool& interrupted) {
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
    const std::string written =
        decision.checkpoint || decision.stop ? save_checkpoint_at(step) : std::string();
    if (recorder_) record_steering(step, written);
    stop = decision.stop;
    paused = !decision.resume && !stop && !interrupted;
  }
  const double waited_s = seconds_since(start);
  not_training_s_ += waited_s;
  if (!stop && !interrupted) {
    fmt::print(out_, "kiln: resumed after {} paused\n", human_duration(waited_s));
    std::fflush(out_);
  }
  return stop;
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
    const store::RunStatus status = summary.interrupted || summary.stopped
                                        ? store::RunStatus::Stopped
                                        : store::RunStatus::Completed;
    const std::string store_error = recorder_->finish(status);
    if (!store_error.empty())
      fmt::print(stderr, "kiln: warning: the run store could not record the end: {}\n",
                 store_error);
  }
  const bool sample = config_.train.sample_tokens > 0 && !summary.interrupted && !summary.stopped;
  if (sample && (layout_.tp() > 1 || layout_.pp() > 1)) {
    fmt::print(out_, "kiln: no sample: each rank holds 1/{} of the model; sample from a checkpoint "
                     "with kiln generate\n",
               layout_.tp() * layout_.pp());
  } else if (sample && is_first_rank()) {
    const TrainConfig& t = config_.train;
    const std::string text = generate(*model_, *tokenizer_, t.sample_prompt, t.sample_tokens,
                                      t.sample_temperature, t.seed);
    fmt::print(out_, "--- sample (temperature {}) ---\n{}\n---\n", t.sample_temperature, text);
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
  double interval_loss = 0;
  int64_t interval_steps = 0;

  for (int64_t step = first_step_; step <= t.steps; ++step) {
    const bool timed = step % t.log_interval == 0 || step == t.steps;
    const double lr = scheduled_lr(step);
    const StepTimes times = train_step(timed);
    consumed_samples_ += t.global_batch;
    const double scale = loss_scaler_.scale();
    const Clock::time_point opt_start = Clock::now();
    const OptimizerStep update = optimizer_->step(lr, scale);
    if (timed) ops_->synchronize();
    const double opt_ms = ms_since(opt_start);
    loss_scaler_.update(update.skipped);
    if (update.skipped) {
      fmt::print(out_, "step {}: gradients overflowed at loss scale {:g}; step skipped ({} so "
                       "far), loss scale now {:g}\n",
                 step, scale, loss_scaler_.skipped_steps(), loss_scaler_.scale());
    }
    const double norm = update.grad_norm;
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
    if (timed || decision.stop || decision.pause || interrupted) {
      // The next interval starts now, so the cost of reporting this one (printing, handing
      // rows to the store) counts in it and not nowhere.
      const Clock::time_point now = Clock::now();
      const double elapsed =
          std::chrono::duration<double>(now - interval_start).count() - not_training_s_;
      const double per_step = elapsed / static_cast<double>(interval_steps);
      summary.train_loss = interval_loss / static_cast<double>(interval_steps);
      interval_start = now;
      interval_loss = 0;
      not_training_s_ = 0;
      interval_steps = 0;
      fmt::print(out_, "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:.0f} tok/s"
                       " | {:.1f} ms/step | ETA {}\n",
                 step, std::to_string(t.steps).size(), t.steps, summary.train_loss, lr, norm,
                 tokens_per_step / per_step, per_step * 1e3,
                 human_duration(per_step * static_cast<double>(t.steps - step)));
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
    if (t.checkpoint_interval > 0 && (step % t.checkpoint_interval == 0 || step == t.steps))
      save_checkpoint_at(step);

    bool stop = decision.stop;
    if (decision.pause && !stop && !interrupted) stop = hold_paused(step, interrupted);
    if (interrupted) {
      summary.interrupted = true;
      fmt::print(out_, "kiln: interrupted; stopped cleanly after step {}\n", step);
      // With periodic checkpoints on, the work since the last one is kept too.
      if (t.checkpoint_interval > 0) save_checkpoint_at(step);
      if (recorder_)
        recorder_->log_event(store::event_kind::kStatus, "interrupted (SIGINT or SIGTERM)", step);
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
