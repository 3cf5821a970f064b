// kiln's fp32 CPU model against an independent PyTorch implementation
// (tests/parity/torch_reference.py): with the same weights and tokens, both must give the
// same logits, loss and parameter gradients, and ten AdamW steps with clipping and
// weight decay must give the same losses. One case for GPT-2, one for a Llama-style
// model (GQA, SwiGLU, RoPE, RMSNorm, untied head, no biases), and each again under LoRA
// (finetune.lora: the base frozen, adapters on some or all of the linear layers, their B
// factors moved off zero so every path carries a gradient), where the frozen weights must
// also come out of the ten steps bit for bit as they went in; and one for Qwen3's layer (the
// Llama one with each query and key head RMS-normalised before RoPE, heads of their own width);
// and two for DeepSeek-V3's latent attention in a Llama layer (with and without the query's
// latent).
// The LoRA cases run again with finetune.lora.dropout: kiln drops each adapter's input as a
// training batch does, and the reference drops the same elements (tests/parity/lora_dropout.py
// computes kiln's counter-based masks from their definition), so the comparisons hold as
// tightly as without dropout.
//
// The test writes a manifest (manifest.json) and little-endian fp32/int32 files to a
// temp dir, runs /usr/bin/python3 (Debian's python3-torch) on it, and reads back
// the reference's results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/util/random.h"
#include "tests/run_command.h"
#include "tests/small_model.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::CommandResult;
using test::run_command;
using nlohmann::json;

const std::string kPython = "/usr/bin/python3";
const std::string kReference = std::string(KILN_SOURCE_DIR) + "/tests/parity/torch_reference.py";

constexpr int64_t kBatch = 3;
constexpr int kSteps = 10;
constexpr double kLossTol = 1e-5;     // relative, the loss of the first forward
constexpr double kLogitsTol = 1e-5;   // relative, all logits as one tensor
constexpr double kGradTol = 1e-4;     // relative, each gradient tensor
constexpr double kTrainTol = 1e-5;    // relative, each of the losses along 10 AdamW steps
constexpr double kNormTol = 1e-4;     // relative, the gradient norm before each step
// The draw of LoRA's dropout masks: a seed above 2^32 and a sample far into a run, so both
// words of the counter's key and index take part.
constexpr uint64_t kDropoutSeed = 0x1234'5678'9ABCull;
constexpr int64_t kFirstSample = 3'000'000;

template <typename T>
void write_binary(const fs::path& path, const std::vector<T>& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(T)));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::vector<float> read_floats(const fs::path& path, size_t expected) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "the reference did not write " << path;
  std::vector<float> data(expected);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(expected * 4));
  EXPECT_EQ(static_cast<size_t>(in.gcount()), expected * 4) << path << " is short";
  return data;
}

// ||a - b|| / ||b||, in double.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    ref += static_cast<double>(b[i]) * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

double relative_error(double a, double b) { return std::abs(a - b) / std::abs(b); }

// "gpt2", "llama", or either with "_lora" or "_lora_dropout"; "qwen3": llama with each query
// and key head RMS-normalised before RoPE, the heads 24 wide where d_model / n_head is 16;
// "mla": llama with DeepSeek's latent attention (query heads of 12 + 8 turned by RoPE, value
// heads of 10, latents of 24 and 16), "mla_direct_q" without the query's latent, "mla_yarn"
// with YaRN's frequencies, table factor and softmax scale. "mtp": llama with two multi-token
// prediction modules (loss weight 0.3); "mla_mtp": "mla" with one, the embedding tied (the
// modules read it as their input and their head).
ModelConfig parity_model(const std::string& variant) {
  const std::string family = variant.substr(0, variant.find('_'));
  const std::string arch = family == "qwen3" || family == "mla" || family == "mtp" ? "llama" : family;
  ModelConfig m;
  m.qk_norm = family == "qwen3";
  m.explicit_head_dim = m.qk_norm ? 24 : 0;
  if (variant.find("_lora") != std::string::npos) {
    m.lora.rank = 4;
    m.lora.alpha = 8;  // scale 2
    // A quarter dropped: a mask drawn apart from kiln's would differ from it in 2 p (1 - p),
    // 3/8, of each adapter's inputs, far outside every tolerance below.
    m.lora.dropout = variant.ends_with("_dropout") ? 0.25 : 0.0;
    // GPT-2 adapts a part of its fused qkv and leaves the rest: columns within the layer.
    m.lora.targets = arch == "llama" ? "q,k,v,o,gate,up,down" : "q,v,o,fc,down";
  }
  m.arch = arch;
  m.n_layer = 2;
  m.d_model = 64;
  m.n_head = 4;
  m.n_kv_head = arch == "llama" ? 2 : 0;
  if (family == "mla") test::use_latent_attention(m, variant == "mla_direct_q" ? 0 : 24, 16, 12, 8, 10);
  if (variant == "mla_yarn") test::use_short_yarn(m);
  m.d_ff = arch == "llama" ? 96 : 0;  // gpt2: 4 * d_model
  m.vocab_size = 50;
  m.make_vocab_size_divisible_by = 16;  // 50 -> 64 rows: padding exists
  m.seq_len = 16;
  m.tie_embeddings = arch != "llama" || variant == "mla_mtp";
  if (variant.ends_with("mtp")) {
    m.mtp_depth = variant == "mtp" ? 2 : 1;
    m.mtp_loss_weight = 0.3;
  }
  m.rope_theta = 10000.0;
  m.norm_eps = 1e-5;
  m.init_std = 0.05;  // a little above GPT-2's 0.02 so attention and softmax are not flat
  return m;
}

// Real rows of a parameter (vocabulary padding left out) as a flat float vector.
std::vector<float> real_part(const Parameter& p, const Tensor& t) {
  const int64_t n = p.value.numel() / p.value.shape[0] * p.real_rows;
  const float* data = t.as<float>();
  return std::vector<float>(data, data + n);
}

std::vector<int64_t> real_shape(const Parameter& p) {
  std::vector<int64_t> shape;
  for (int i = 0; i < p.value.shape.rank; ++i) shape.push_back(p.value.shape[i]);
  shape[0] = p.real_rows;
  return shape;
}

class TorchParity : public testing::TestWithParam<std::string> {};

TEST_P(TorchParity, LogitsLossGradientsAndAdamWStepsMatchPyTorch) {
  const std::string arch = GetParam();  // with _lora for the LoRA cases

  const fs::path dir = fs::path(testing::TempDir()) / ("kiln_torch_parity_" + arch);
  fs::remove_all(dir);
  fs::create_directories(dir / "params");

  const ModelConfig mc = parity_model(arch);
  const int64_t T = mc.seq_len, V = mc.vocab_size, N = kBatch * T;
  auto ops = make_cpu_ops(2);
  GptModel model(mc, kBatch, *ops, DType::F32);
  model.init_parameters(20240611);

  // Norm weights and biases start at one and zero; move them off so that their forward
  // paths (and the bias adds) are exercised too.
  Random jitter(99);
  for (const Parameter& p : model.parameters().all()) {
    if (p.value.shape.rank != 1) continue;
    const bool is_weight = p.name.ends_with(".weight");
    float* v = p.value.as<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i)
      v[i] = static_cast<float>((is_weight ? 1.0 : 0.0) + 0.1 * jitter.normal());
  }
  // B starts at zero, and with it A's gradient: moved off so that A's path is checked too.
  for (const Parameter& p : model.parameters().all()) {
    if (!p.name.ends_with(".lora_b")) continue;
    float* v = p.value.as<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i) v[i] = static_cast<float>(0.05 * jitter.normal());
  }
  std::map<std::string, std::vector<float>> frozen_before;
  for (const Parameter& p : model.parameters().all())
    if (p.frozen) frozen_before[p.name].assign(p.value.as<float>(), p.value.as<float>() + p.value.numel());
  EXPECT_EQ(frozen_before.empty(), !mc.lora.enabled());

  // Seeded tokens and targets; one target masked.
  Random pick(static_cast<uint64_t>(arch.size()) * 7919 + 5);
  std::vector<int32_t> tokens(static_cast<size_t>(N)), targets(static_cast<size_t>(N));
  for (auto& t : tokens) t = static_cast<int32_t>(pick.below(static_cast<uint64_t>(V)));
  for (auto& t : targets) t = static_cast<int32_t>(pick.below(static_cast<uint64_t>(V)));
  targets[static_cast<size_t>(T + 5)] = -1;
  write_binary(dir / "tokens.bin", tokens);
  write_binary(dir / "targets.bin", targets);

  // Weights, real rows only.
  json params = json::array();
  for (const Parameter& p : model.parameters().all()) {
    write_binary(dir / "params" / (p.name + ".bin"), real_part(p, p.value));
    params.push_back({{"name", p.name}, {"shape", real_shape(p)}, {"decay", p.decay}, {"trains", !p.frozen}});
  }

  // kiln: logits, loss, gradients, of a training batch (which LoRA's dropout drops in).
  const DropoutDraw draw{kDropoutSeed, kFirstSample};
  model.set_batch(tokens.data(), targets.data(), kBatch, T, 0, {}, draw);
  ASSERT_EQ(model.target_count(), N - 1);
  model.zero_grad();
  const double loss = model.forward();
  std::vector<double> mtp_losses;
  for (int k = 0; k < mc.mtp_depth; ++k)
    mtp_losses.push_back(model.mtp_loss_sums()[static_cast<size_t>(k)] /
                         static_cast<double>(model.mtp_target_counts()[static_cast<size_t>(k)]));
  std::vector<float> logits, row;  // read before backward turns them into their gradient
  for (int64_t r = 0; r < N; ++r) {
    model.logits_row(r, row);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  model.backward(1.0 / static_cast<double>(model.target_count()));
  std::map<std::string, std::vector<float>> grads;
  for (const Parameter& p : model.parameters().all())
    if (!p.frozen) grads[p.name] = real_part(p, p.grad);

  // kiln: ten AdamW steps on the same batch, lr varying per step. clip_grad sits below
  // the gradient norm of the first steps so clipping takes part.
  TrainConfig train;
  train.beta1 = 0.9;
  train.beta2 = 0.95;
  train.adam_eps = 1e-8;
  train.weight_decay = 0.1;
  double norm0 = 0;
  for (const auto& [name, g] : grads)
    for (float x : g) norm0 += static_cast<double>(x) * x;
  norm0 = std::sqrt(norm0);
  train.clip_grad = 0.5 * norm0;
  std::vector<double> lrs;
  for (int s = 0; s < kSteps; ++s) lrs.push_back(3e-3 * (1.0 - 0.05 * s));
  AdamW adamw(train, model.parameters(), *ops);
  std::vector<double> losses, norms;
  for (int s = 0; s < kSteps; ++s) {
    model.zero_grad();
    losses.push_back(model.forward());
    model.backward(1.0 / static_cast<double>(model.target_count()));
    norms.push_back(adamw.step(lrs[static_cast<size_t>(s)]).grad_norm);
  }
  losses.push_back(model.forward());  // after the last step
  for (const Parameter& p : model.parameters().all()) {
    if (!p.frozen) continue;
    EXPECT_TRUE(std::equal(frozen_before[p.name].begin(), frozen_before[p.name].end(), p.value.as<float>()))
        << p.name << " is frozen and changed in training";
  }
  const int clipped = static_cast<int>(
      std::count_if(norms.begin(), norms.end(), [&](double n) { return n > train.clip_grad; }));
  EXPECT_GT(clipped, 0) << "clip_grad never triggered: the test no longer covers clipping";

  json manifest = {
      {"arch", mc.arch},
      {"n_layer", mc.n_layer},
      {"d_model", mc.d_model},
      {"n_head", mc.n_head},
      {"n_kv_head", mc.kv_heads()},
      {"head_dim", mc.head_dim()},
      {"d_ff", mc.ffn_dim()},
      {"vocab_size", mc.vocab_size},
      {"seq_len", mc.seq_len},
      {"rope_theta", mc.rope_theta},
      {"norm_eps", mc.norm_eps},
      {"tie_embeddings", mc.tie_embeddings},
      {"qk_norm", mc.qk_norm},
      {"attention", mc.attention},
      {"q_lora_rank", mc.q_lora_rank},
      {"kv_lora_rank", mc.kv_lora_rank},
      {"qk_nope_head_dim", mc.qk_nope_head_dim},
      {"qk_rope_head_dim", mc.qk_rope_head_dim},
      {"v_head_dim", mc.v_head_dim},
      {"mtp_depth", mc.mtp_depth},
      {"mtp_loss_weight", mc.mtp_loss_weight},
      {"yarn", mc.rope_scaling == "yarn" ? json{{"factor", mc.rope_scaling_factor},
                                               {"original_max_position_embeddings", mc.rope_original_seq_len},
                                               {"beta_fast", mc.rope_beta_fast},
                                               {"beta_slow", mc.rope_beta_slow},
                                               {"mscale", mc.rope_mscale},
                                               {"mscale_all_dim", mc.rope_mscale_all_dim}}
                                        : json()},
      {"lora_scale", mc.lora.enabled() ? mc.lora.scale() : 0.0},
      {"lora_dropout", mc.lora.dropout > 0 ? json{{"p", mc.lora.dropout}, {"seed", draw.seed},
                                                  {"first_sample", draw.first_sample}}
                                            : json()},
      {"batch", kBatch},
      {"params", params},
      {"steps", kSteps},
      {"lr", lrs},
      {"beta1", train.beta1},
      {"beta2", train.beta2},
      {"adam_eps", train.adam_eps},
      {"weight_decay", train.weight_decay},
      {"clip_grad", train.clip_grad},
  };
  std::ofstream(dir / "manifest.json") << manifest.dump(2);

  const CommandResult ref = run_command(kPython + " " + kReference + " " + dir.string());
  if (ref.exit_code != 0) {
    // Never skip: a machine without the reference is a machine not set up.
    const CommandResult probe = run_command(kPython + " -c 'import torch, numpy'");
    ASSERT_EQ(probe.exit_code, 0)
        << kPython << " cannot import torch and numpy (Debian's python3-torch, python3-numpy);"
        << " run scripts/setup.sh. Output:\n"
        << probe.output;
    FAIL() << "the torch reference failed:\n" << ref.output;
  }

  json result;
  std::ifstream(dir / "result.json") >> result;
  std::ostringstream report;
  report.precision(3);
  report << std::scientific << arch << ":";

  // Loss and logits.
  const double loss_error = relative_error(loss, result["loss"].get<double>());
  EXPECT_LT(loss_error, kLossTol) << "loss kiln " << loss << " torch " << result["loss"];
  const double logits_error =
      relative_error(logits, read_floats(dir / "logits.bin", static_cast<size_t>(N * V)));
  EXPECT_LT(logits_error, kLogitsTol) << "logits";
  report << " loss " << loss_error << ", logits " << logits_error;
  const auto ref_mtp = result["mtp_losses"].get<std::vector<double>>();
  ASSERT_EQ(ref_mtp.size(), mtp_losses.size());
  for (size_t k = 0; k < mtp_losses.size(); ++k) {
    const double e = relative_error(mtp_losses[k], ref_mtp[k]);
    EXPECT_LT(e, kLossTol) << "depth " << k + 1 << "'s loss kiln " << mtp_losses[k] << " torch " << ref_mtp[k];
    report << ", depth " << k + 1 << " loss " << e;
  }

  // Every gradient tensor.
  double worst_grad = 0;
  std::string worst_name;
  for (const Parameter& p : model.parameters().all()) {
    if (p.frozen) continue;
    const auto& mine = grads[p.name];
    const double e =
        relative_error(mine, read_floats(dir / "grads" / (p.name + ".bin"), mine.size()));
    EXPECT_LT(e, kGradTol) << "gradient of " << p.name;
    if (e >= worst_grad) worst_grad = e, worst_name = p.name;
  }
  report << ", worst gradient " << worst_grad << " (" << worst_name << ")";

  // Ten AdamW steps: the loss before each, and after the last; the norm before clipping.
  const auto ref_losses = result["losses"].get<std::vector<double>>();
  const auto ref_norms = result["grad_norms"].get<std::vector<double>>();
  ASSERT_EQ(ref_losses.size(), losses.size());
  ASSERT_EQ(ref_norms.size(), norms.size());
  double worst_train = 0, worst_norm = 0;
  for (size_t s = 0; s < losses.size(); ++s) {
    const double e = relative_error(losses[s], ref_losses[s]);
    EXPECT_LT(e, kTrainTol) << "loss before step " << s + 1 << ": kiln " << losses[s]
                            << " torch " << ref_losses[s];
    worst_train = std::max(worst_train, e);
  }
  for (size_t s = 0; s < norms.size(); ++s) {
    const double e = relative_error(norms[s], ref_norms[s]);
    EXPECT_LT(e, kNormTol) << "gradient norm at step " << s + 1;
    worst_norm = std::max(worst_norm, e);
  }
  EXPECT_LT(losses.back(), losses.front()) << "ten steps on one batch should lower the loss";
  report << ", " << kSteps << "-step losses " << worst_train << " (" << losses.front() << " -> "
         << losses.back() << "), grad norms " << worst_norm << ", clipped steps " << clipped;
  std::printf("parity %s\n", report.str().c_str());
}

INSTANTIATE_TEST_SUITE_P(Arch, TorchParity, testing::Values("gpt2", "llama", "gpt2_lora", "llama_lora", "gpt2_lora_dropout",
                                                       "llama_lora_dropout", "qwen3", "mla", "mla_direct_q", "mla_yarn",
                                                       "mtp", "mla_mtp"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace kiln
