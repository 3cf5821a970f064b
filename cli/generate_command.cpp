#include "cli/generate_command.h"

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/terminal_text.h"
#include "base/utf8.h"
#include "cli/inference_model.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/data/blended_dataset.h"
#include "trainer/data/token_batch.h"
#include "trainer/train/generate.h"
#include "trainer/train/text_stream.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::string> kDevices = {"cpu", "cuda", "auto"};

struct GenerateCliOptions {
  std::string checkpoint;
  std::string prompt;
  bool prompt_given = false;  // else the run's train.sample_prompt
  int max_tokens = 200;
  SamplingOptions sampling;
  uint64_t seed = 0;
  bool seed_given = false;
  std::string tokenizer;
  std::string device = "auto";
};

struct EvalOptions {
  std::string checkpoint;
  std::string data;  // empty: the run's own data.paths
  int64_t iters = 0;
  bool iters_given = false;
  std::string split = "valid";
  int micro_batch = 0;
  std::string tokenizer;
  std::string device = "auto";
};

// The model's text as it comes: raw into a file or a pipe, which take it as data; on a
// terminal, its control characters shown as escapes rather than obeyed.
void write_out(std::string_view text) {
  static const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  const std::string shown = terminal ? terminal_block(text) : std::string(text);
  std::fwrite(shown.data(), 1, shown.size(), stdout);
  std::fflush(stdout);
}

void run_generate(const GenerateCliOptions& o) {
  check_sampling(o.sampling);
  if (o.max_tokens < 0) fail(fmt::format("--max-tokens must be 0 or more, got {}", o.max_tokens));
  const InferenceModel m = load_inference_model(o.checkpoint, o.device, o.tokenizer, 1);
  // By default the prompt of the trainer's own sample: text the model has seen the like of.
  const std::string& text = o.prompt_given ? o.prompt : m.config.train.sample_prompt.first();
  std::vector<int32_t> prompt;
  try {
    prompt = prompt_ids(*m.tokenizer, text);
  } catch (const InvalidUtf8& e) {
    fail(
        fmt::format("--prompt is not valid UTF-8 (byte 0x{:02x} at offset {}), and tokenizer {} "
                    "reads UTF-8 text only",
                    e.byte, e.offset, m.tokenizer->name()));
  }
  GptDecoder decoder(*m.model);
  GenerateOptions options;
  options.max_tokens = o.max_tokens;
  options.sampling = o.sampling;
  // By default the run's seed: the same prompt and temperature give the trainer's sample.
  options.seed = o.seed_given ? o.seed : m.config.train.seed;
  options.stop_id = m.tokenizer->eod();

  write_out(text);
  TextStream stream(write_out);
  const Clock::time_point start = Clock::now();
  const std::vector<int32_t> produced = generate_ids(decoder, prompt, options, [&](int32_t id) {
    stream.add(m.tokenizer->decode(std::span<const int32_t>(&id, 1)));
  });
  stream.finish();
  write_out("\n");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  fmt::print(
      stderr, "kiln: {} tokens in {:.2f} s ({:.1f} tokens/s){}\n", produced.size(), seconds,
      static_cast<double>(produced.size()) / std::max(seconds, 1e-9),
      static_cast<int>(produced.size()) < o.max_tokens ? ", ended at the end of document" : "");
}

Split split_of(const std::string& name) {
  if (name == "train") return Split::Train;
  if (name == "test") return Split::Test;
  return Split::Valid;
}

// The datasets to evaluate: --data, else the run's own data.paths (a blend as it read them),
// which must be where the run read them (relative paths from the folder it trained in).
std::vector<std::string> eval_paths(const EvalOptions& o, const DataConfig& run) {
  if (!o.data.empty()) return {o.data};
  if (run.paths.empty()) fail("eval: the checkpoint's run names no data (data.paths is empty); give --data PREFIX");
  for (const WeightedPrefix& p : parse_data_paths(run.paths))
    if (!std::filesystem::exists(p.prefix + ".idx"))
      fail("eval: the run's data.paths holds " + p.prefix + ", and there is no " + p.prefix +
           ".idx here; give --data PREFIX, or run from the folder the run trained in");
  return run.paths;
}

void run_eval(const EvalOptions& o) {
  if (o.iters < 0)
    fail(fmt::format("--iters must be 0 (the whole split) or more, got {}", o.iters));
  if (o.micro_batch < 0)
    fail(fmt::format("--micro-batch must be at least 1, got {}", o.micro_batch));
  const std::string path = checkpoint_argument(o.checkpoint);
  const Config saved = config_from_json(checkpoint_config(path));
  const int64_t B = o.micro_batch > 0 ? o.micro_batch : saved.train.micro_batch;
  const std::vector<std::string> paths = eval_paths(o, saved.data);
  // On the run's own data the run's validation by default: its first train.eval_iters
  // micro-batches, the loss the run logged for this checkpoint.
  const int64_t iters = o.iters_given || !o.data.empty() ? o.iters : saved.train.eval_iters;
  if (const size_t blended = parse_data_paths(paths).size(); iters == 0 && blended > 1)
    fail(fmt::format("eval: --iters 0 reads the whole split of one dataset, and the run's data.paths blends {}; give "
                     "--iters N or --data PREFIX",
                     blended));
  const InferenceModel m = load_inference_model(path, o.device, o.tokenizer, B);
  const ModelConfig& mc = m.config.model;
  // Every sample of the split once (or the first iters micro-batches' worth), in the
  // dataset's order, read the way the run read its data.
  const int64_t T = mc.seq_len;
  GptDatasetSpec spec;
  spec.split = m.config.data.split;
  spec.which = split_of(o.split);
  spec.num_samples = iters * B;
  spec.seq_len = mc.seq_len;
  spec.seed = m.config.train.seed;
  spec.cache_dir = m.config.data.cache_dir;
  const std::unique_ptr<SampleSource> data = open_samples(paths, spec);
  const DataConfig& d = m.config.data;
  TokenBatch batch(DocumentOptions{m.tokenizer->eod(), d.eod_mask_loss, d.reset_position_ids,
                                   d.reset_attention_mask});
  if (data->max_token_id() >= mc.vocab_size)
    fail(fmt::format("data: token id {} in {} is outside model.vocab_size={}", data->max_token_id(),
                     data->describe(), mc.vocab_size));

  const std::vector<int64_t> bytes_of = text_bytes_per_id(*m.tokenizer, mc.vocab_size);

  const int64_t samples = iters > 0 ? iters * B : data->num_samples();
  double loss_sum = 0;
  int64_t token_count = 0, byte_count = 0;
  for (int64_t first = 0; first < samples; first += B) {
    const int64_t b = std::min(B, samples - first);
    batch.fill(*data, first, b, mc.seq_len);
    byte_count += batch.target_text_bytes(bytes_of);
    m.model->set_batch(batch.tokens(), batch.targets(), b, T, 0,
                       {batch.positions(), batch.attention_starts()});
    loss_sum += m.model->forward() * static_cast<double>(m.model->target_count());
    token_count += m.model->target_count();
  }
  const double loss = loss_sum / static_cast<double>(token_count);
  nlohmann::ordered_json result;
  result["loss"] = loss;
  result["perplexity"] = std::exp(loss);
  result["tokens"] = token_count;
  result["bits_per_byte"] =
      byte_count > 0
          ? nlohmann::ordered_json(loss_sum / std::log(2.0) / static_cast<double>(byte_count))
          : nlohmann::ordered_json(nullptr);
  result["bytes"] = byte_count;
  result["samples"] = samples;
  result["split"] = o.split;
  result["checkpoint"] = m.path;
  fmt::print("{}\n", result.dump());
}

void add_device_option(CLI::App* cmd, std::string& device) {
  cmd->add_option("--device", device, "cpu, cuda, or auto (a GPU when one is visible)")
      ->check(CLI::IsMember(kDevices))
      ->capture_default_str();
}

}  // namespace

void add_generate_commands(CLI::App& app) {
  auto g = std::make_shared<GenerateCliOptions>();
  CLI::App* gen = app.add_subcommand(
      "generate", "Continue a prompt with a trained model, streaming the text as it comes");
  add_checkpoint_option(gen, g->checkpoint);
  CLI::Option* prompt = gen->add_option(
      "--prompt", g->prompt, "The text to continue (default: the run's train.sample_prompt, its first; \"\": start a new document)");
  gen->add_option("--max-tokens", g->max_tokens, "Tokens to generate at most")
      ->capture_default_str();
  gen->add_option("--temperature", g->sampling.temperature, "Softmax temperature; 0 is greedy")
      ->capture_default_str();
  gen->add_option("--top-k", g->sampling.top_k, "Draw from the K most likely tokens (0: all)")
      ->capture_default_str();
  gen->add_option("--top-p", g->sampling.top_p,
                  "Draw from the fewest most likely tokens whose probability reaches P")
      ->capture_default_str();
  CLI::Option* seed =
      gen->add_option("--seed", g->seed, "Random seed (default: the run's train.seed)");
  gen->add_option("--tokenizer", g->tokenizer,
                  "Tokenizer spec (default: the run's data.tokenizer)");
  add_device_option(gen, g->device);
  gen->callback([g, seed, prompt] {
    g->seed_given = seed->count() > 0;
    g->prompt_given = prompt->count() > 0;
    run_generate(*g);
  });

  auto e = std::make_shared<EvalOptions>();
  CLI::App* eval = app.add_subcommand(
      "eval", "Print a checkpoint's loss, perplexity and bits per byte on a dataset, as JSON");
  add_checkpoint_option(eval, e->checkpoint);
  eval->add_option("--data", e->data,
                   "Indexed dataset prefix (PREFIX.bin + PREFIX.idx) (default: the run's own data.paths)");
  CLI::Option* iters = eval->add_option(
      "--iters", e->iters,
      "Micro-batches to evaluate, 0: the whole split (default: the run's train.eval_iters on its own data, 0 with --data)");
  eval->add_option("--split", e->split, "Which split of data.split")
      ->check(CLI::IsMember({"train", "valid", "test"}))
      ->capture_default_str();
  eval->add_option("--micro-batch", e->micro_batch,
                   "Sequences per forward (default: the run's train.micro_batch)");
  eval->add_option("--tokenizer", e->tokenizer,
                   "Tokenizer spec (default: the run's data.tokenizer)");
  add_device_option(eval, e->device);
  eval->callback([e, iters] {
    e->iters_given = iters->count() > 0;
    run_eval(*e);
  });
}

}  // namespace kiln
