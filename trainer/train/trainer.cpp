#include "trainer/train/trainer.h"

#include <chrono>
#include <cmath>

#include <fmt/core.h>

#include "kernels/check.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/train/backend.h"
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

void check_single_process(const ParallelConfig& p) {
  const int model_parallel = p.tp * p.pp;
  if (model_parallel != 1)
    fail(fmt::format("parallel.tp={} x parallel.pp={} needs a multiple of {} processes; this "
                     "build trains on 1 process",
                     p.tp, p.pp, model_parallel));
  if (p.vpp != 1) fail("parallel.vpp needs pipeline parallelism (parallel.pp > 1)");
}

}  // namespace

Trainer::Trainer(const Config& config, std::FILE* out)
    : config_(config),
      out_(out),
      loss_scaler_(config.precision.dtype == "fp16" ? LossScaler::dynamic() : LossScaler::none()) {
  check_single_process(config_.parallel);
  KILN_CHECK(!config_.data.paths.empty(), "data.paths is empty: name at least one dataset prefix");
  ops_ = make_ops(config_);

  const ModelConfig& m = config_.model;
  train_data_ = std::make_unique<GptDataset>(config_.data.paths, config_.data.split, Split::Train,
                                             m.seq_len, config_.train.seed);
  if (config_.data.split_fractions()[1] > 0)
    valid_data_ = std::make_unique<GptDataset>(config_.data.paths, config_.data.split,
                                               Split::Valid, m.seq_len, config_.train.seed);
  for (const GptDataset* data : {train_data_.get(), valid_data_.get()}) {
    if (data && data->max_token_id() >= m.vocab_size)
      fail(fmt::format("data: token id {} in {} is outside model.vocab_size={}",
                       data->max_token_id(), config_.data.paths.front(), m.vocab_size));
  }

  const DType dtype = compute_dtype(config_.precision);
  model_ = std::make_unique<GptModel>(m, config_.train.micro_batch, *ops_, dtype,
                                      AdamW::state_bytes_per_element(dtype));
  model_->init_parameters(config_.train.seed);
  optimizer_ = std::make_unique<AdamW>(config_.train, model_->parameters(), *ops_);

  const TrainConfig& t = config_.train;
  fmt::print(out_, "kiln: {} model, {} layers, d_model {}, {} heads ({} kv), {:.2f}M parameters, "
                   "vocab {} (padded {}), seq_len {}\n",
             m.arch, m.n_layer, m.d_model, m.n_head, m.kv_heads(),
             static_cast<double>(model_->parameters().count()) / 1e6, m.vocab_size,
             m.padded_vocab(), m.seq_len);
  fmt::print(out_, "kiln: {}, {}; global batch {} = {} micro-batches of {}, {} tokens a step, {} steps\n",
             ops_->name(), config_.precision.dtype, t.global_batch, config_.grad_accum(),
             t.micro_batch, static_cast<int64_t>(t.global_batch) * m.seq_len, t.steps);
  fmt::print(out_, "kiln: data {}: train {} tokens ({} samples){}\n", config_.data.paths.front(),
             train_data_->num_tokens(), train_data_->num_samples(),
             valid_data_ ? fmt::format(", valid {} tokens", valid_data_->num_tokens())
                         : std::string(", no valid split"));
  std::string memory = "kiln: memory";
  size_t total = optimizer_->bytes();
  for (const ArenaSize& a : model_->memory()) {
    memory += fmt::format(" {} {} |", a.name, human_bytes(a.bytes));
    total += a.bytes;
  }
  fmt::print(out_, "{} optimizer {} | total {}\n", memory, human_bytes(optimizer_->bytes()),
             human_bytes(total));
  std::fflush(out_);
}

Trainer::~Trainer() = default;

void Trainer::fill_batch(const GptDataset& data, int64_t first_sample) {
  const int64_t B = config_.train.micro_batch, T = config_.model.seq_len;
  window_.resize(static_cast<size_t>(T + 1));
  tokens_.resize(static_cast<size_t>(B * T));
  targets_.resize(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    data.sample(first_sample + b, window_.data());
    std::copy(window_.begin(), window_.end() - 1, tokens_.begin() + b * T);
    std::copy(window_.begin() + 1, window_.end(), targets_.begin() + b * T);
  }
  model_->set_batch(tokens_.data(), targets_.data(), B, T);
}

double Trainer::train_step(int64_t step) {
  const int accum = config_.grad_accum();
  const int64_t B = config_.train.micro_batch;
  const double tokens_per_step =
      static_cast<double>(config_.train.global_batch) * config_.model.seq_len;
  model_->zero_grad();
  double loss = 0;
  for (int micro = 0; micro < accum; ++micro) {
    fill_batch(*train_data_, (step - 1) * config_.train.global_batch + micro * B);
    loss += model_->forward() / accum;
    model_->backward(loss_scaler_.scale() / tokens_per_step);
  }
  return loss;
}

double Trainer::evaluate() {
  const int64_t B = config_.train.micro_batch;
  double loss = 0;
  for (int64_t i = 0; i < config_.train.eval_iters; ++i) {
    fill_batch(*valid_data_, i * B);
    loss += model_->forward();
  }
  return loss / static_cast<double>(config_.train.eval_iters);
}

TrainSummary Trainer::run() {
  const TrainConfig& t = config_.train;
  const double tokens_per_step = static_cast<double>(t.global_batch) * config_.model.seq_len;
  const bool validate = valid_data_ && t.eval_interval > 0 && t.eval_iters > 0;
  install_interrupt_handler();
  TrainSummary summary;
  const Clock::time_point start = Clock::now();
  Clock::time_point interval_start = start;
  double interval_loss = 0;
  int64_t interval_steps = 0;

  for (int64_t step = 1; step <= t.steps; ++step) {
    const double lr = learning_rate(t, step);
    const double loss = train_step(step);
    const double scale = loss_scaler_.scale();
    const OptimizerStep update = optimizer_->step(lr, scale);
    loss_scaler_.update(update.skipped);
    if (update.skipped) {
      fmt::print(out_, "step {}: gradients overflowed at loss scale {:g}; step skipped ({} so "
                       "far), loss scale now {:g}\n",
                 step, scale, loss_scaler_.skipped_steps(), loss_scaler_.scale());
    }
    const double norm = update.grad_norm;
    if (!std::isfinite(loss)) fail(fmt::format("loss is {} at step {}", loss, step));
    interval_loss += loss;
    ++interval_steps;
    summary.steps = step;
    const bool stop = interrupt_requested();

    if (step % t.log_interval == 0 || step == t.steps || stop) {
      const double elapsed = seconds_since(interval_start);
      const double per_step = elapsed / static_cast<double>(interval_steps);
      summary.train_loss = interval_loss / static_cast<double>(interval_steps);
      fmt::print(out_, "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:.0f} tok/s"
                       " | {:.1f} ms/step | ETA {}\n",
                 step, std::to_string(t.steps).size(), t.steps, summary.train_loss, lr, norm,
                 tokens_per_step / per_step, per_step * 1e3,
                 human_duration(per_step * static_cast<double>(t.steps - step)));
      std::fflush(out_);
      interval_start = Clock::now();
      interval_loss = 0;
      interval_steps = 0;
    }
    if (validate && (step % t.eval_interval == 0 || step == t.steps)) {
      summary.valid_loss = evaluate();
      fmt::print(out_, "eval step {} | valid loss {:.4f} | {:.3f} bits per token\n", step,
                 *summary.valid_loss, *summary.valid_loss / std::log(2.0));
      std::fflush(out_);
    }
    if (stop) {
      summary.interrupted = true;
      fmt::print(out_, "kiln: interrupted; stopped cleanly after step {}\n", step);
      break;
    }
  }
  fmt::print(out_, "kiln: trained {} steps in {}\n", summary.steps,
             human_duration(seconds_since(start)));
  if (t.sample_tokens > 0 && !summary.interrupted) {
    const std::string text = generate(*model_, ByteTokenizer{}, t.sample_prompt, t.sample_tokens,
                                      t.sample_temperature, t.seed);
    fmt::print(out_, "--- sample (temperature {}) ---\n{}\n---\n", t.sample_temperature, text);
  }
  std::fflush(out_);
  return summary;
}

}  // namespace kiln
