// An exported model, read the way transformers reads it: tests/parity/torch_reference.py
// --hf loads the config.json and model.safetensors that `kiln export` wrote (parsing the
// safetensors by hand, mapping Hugging Face's names and layouts itself) into its PyTorch
// model, and must reproduce kiln's loss and logits on the same tokens, for a GPT-2 (tied,
// biases, Conv1D layouts), a Llama-style model (GQA, split q/k/v and gate/up, untied), a
// Mixtral (its router and per-expert w1/w2/w3), the Qwen and Mistral classes, DeepSeek-V3's
// (latent attention with its rotary rows interleaved, sigmoid routing in groups with a
// selection bias, shared experts, a dense layer; YaRN); and a LoRA model of each architecture, whose
// export merges each adapter into its weight (W + scale B A): torch's base-model loss on the
// merged weights is kiln's loss with the adapters beside them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/run_command.h"
#include "tests/small_model.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/interchange/hf_export.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const std::string kExportPython = "/usr/bin/python3";
const std::string kExportReference = std::string(KILN_SOURCE_DIR) + "/tests/parity/torch_reference.py";
constexpr int64_t kExportBatch = 3;
constexpr double kTolerance = 1e-5;  // relative, loss and all logits

// "mixtral": the Llama model with 4 experts of width 48, top 2, in both layers. "qwen3": the
// Llama model with normalised query and key heads 24 wide (not 64 / 4) and the embedding tied,
// as Qwen3's small models have it; "qwen3_moe" the same with Qwen3-MoE's experts (layer 0
// dense, the gates not normalised). "mistral": the Llama model written as MistralForCausalLM, its
// sliding window the whole context of 16 (the reference masks by it: a shorter one would show).
// "deepseek_v3": the Llama model with DeepSeek's latent attention (query latent 24, key/value
// latent 16, heads of 12 + 8 turned by RoPE, values 10) and its experts after a dense layer 0:
// 16 sigmoid-scored experts of width 16 in 4 groups, a token's 4 from its 2 best groups (each
// group scored by its best 2, as transformers and kiln both score them here), 2 shared
// experts, the gates normalised and scaled by 2.5, and a selection bias (set in the test).
// "deepseek_v3_direct_q": dense, the queries projected straight from the input;
// "deepseek_v3_yarn": dense, YaRN stretching a context of 4 by 4 with both mscales set.
ModelConfig export_model(const std::string& name) {
  const bool mixtral = name == "mixtral", llama3 = name == "llama3_rope", qwen2 = name == "qwen2";
  ModelConfig m = test::small_model(name.starts_with("gpt2") ? "gpt2" : "llama", 64, 300, 16);  // 257 byte ids and more
  if (name.ends_with("_lora")) {
    m.lora.rank = 4;
    m.lora.alpha = 8;
    m.lora.targets = name.starts_with("gpt2") ? "q,o,fc,down" : "q,k,v,o,gate,up,down";
  }
  m.make_vocab_size_divisible_by = 64;                                     // padded to 320
  m.init_std = 0.05;
  if (mixtral || name == "qwen3_moe") {
    m.moe.num_experts = 4;
    m.moe.top_k = 2;
    m.moe.ffn_hidden = 48;
  }
  if (name == "qwen3_moe") {  // layer 0 dense, the gates not normalised (norm_topk_prob false)
    m.moe.dense_layers = 1;
    m.moe.normalize_top_k = false;
  }
  m.attention_bias = qwen2;
  if (name == "mistral") {
    m.family = "mistral";
    m.sliding_window = 16;
  }
  if (name.starts_with("qwen3")) {
    m.qk_norm = true;
    m.explicit_head_dim = 24;
    m.tie_embeddings = true;
  }
  if (name.starts_with("deepseek_v3")) {
    test::use_latent_attention(m, name == "deepseek_v3_direct_q" ? 0 : 24, 16, 12, 8, 10);
    m.norm_eps = 1e-6;  // DeepseekV3's latent norms' whatever rms_norm_eps says
  }
  if (name == "deepseek_v3") test::use_deepseek_experts(m, 16, 16);
  if (name == "deepseek_v3_yarn") test::use_short_yarn(m);
  if (llama3) {
    // Llama 3.1's scaling cut down to this model: with head dim 16 and an original context of
    // 32, the first frequency pair stays, the second is blended and the rest are divided.
    m.rope_scaling = "llama3";
    m.rope_scaling_factor = 4.0;
    m.rope_original_seq_len = 32;
  }
  return m;
}

template <typename T>
void write_export_input(const fs::path& path, const std::vector<T>& data) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()),
             static_cast<std::streamsize>(data.size() * sizeof(T)));
}

class HfExportParity : public testing::TestWithParam<std::string> {};

TEST_P(HfExportParity, PyTorchReadsTheExportAndGivesKilnsLoss) {
  const std::string arch = GetParam();
  const fs::path dir = fs::path(testing::TempDir()) / ("kiln_hf_parity_" + arch);
  fs::remove_all(dir);
  fs::create_directories(dir);

  const ModelConfig mc = export_model(arch);
  const int64_t T = mc.seq_len, N = kExportBatch * T;
  auto ops = make_cpu_ops(2);
  GptModel model(mc, kExportBatch, *ops);
  model.init_parameters(424242);
  Random jitter(3);  // norm weights and biases off their ones and zeros
  for (const Parameter& p : model.parameters().all())
    if (p.value.shape.rank == 1)
      for (int64_t i = 0; i < p.value.numel(); ++i)
        p.value.as<float>()[i] =
            static_cast<float>((p.name.ends_with(".weight") ? 1.0 : 0.0) + 0.1 * jitter.normal());
  for (const Parameter& p : model.parameters().all())  // adapters that change the model
    if (p.name.ends_with(".lora_b"))
      for (int64_t i = 0; i < p.value.numel(); ++i) p.value.as<float>()[i] = static_cast<float>(0.05 * jitter.normal());

  Random pick(17);
  std::vector<int32_t> tokens(static_cast<size_t>(N)), targets(static_cast<size_t>(N));
  for (auto& t : tokens) t = static_cast<int32_t>(pick.below(300));
  for (auto& t : targets) t = static_cast<int32_t>(pick.below(300));
  targets[7] = -1;
  model.set_batch(tokens.data(), targets.data(), kExportBatch, T);
  // DeepSeek's selection bias (exported as e_score_correction_bias), the size of the scores'
  // spread, so that it changes which experts tokens take; every s + bias stays positive
  // (transformers counts the experts of dropped groups as 0, kiln leaves them out).
  std::map<int, std::vector<double>> expert_bias;
  for (int l = 0; l < mc.n_layer; ++l)
    if (mc.moe.enabled() && mc.moe.score == "sigmoid" && mc.moe.is_moe_layer(l))
      for (int e = 0; e < mc.moe.num_experts; ++e) expert_bias[l].push_back(0.1 * jitter.normal());
  if (!expert_bias.empty()) {
    const double unbiased = model.forward();
    for (const auto& [layer, bias] : expert_bias) model.experts(layer)->set_bias(*ops, bias);
    EXPECT_GT(std::abs(model.forward() - unbiased), 1e-4) << "the selection bias must change the loss";
  }
  const double loss = model.forward();
  std::vector<float> logits, row;
  for (int64_t r = 0; r < N; ++r) {
    model.logits_row(r, row);
    logits.insert(logits.end(), row.begin(), row.end());
  }

  TrainConfig train;
  AdamW optimizer(train, model.parameters(), *ops);
  Config config;
  config.model = mc;
  TrainingState state;
  state.run_name = "parity";
  state.layout = "tp1.pp1.dp1";
  state.config = config_to_json(config);
  state.expert_bias = expert_bias;
  const std::string checkpoint =
      save_checkpoint((dir / "checkpoints").string(), state, model, optimizer.state_for_checkpoint(), *ops, 0).path;
  export_hf(checkpoint, (dir / "hf").string());

  write_export_input(dir / "tokens.bin", tokens);
  write_export_input(dir / "targets.bin", targets);
  std::ofstream(dir / "manifest.json") << nlohmann::json{{"batch", kExportBatch}, {"seq_len", T}}.dump();
  const test::CommandResult ref = test::run_command(kExportPython + " " + kExportReference + " --hf " +
                                                    (dir / "hf").string() + " " + dir.string());
  ASSERT_EQ(ref.exit_code, 0) << "the torch reference failed (scripts/setup.sh installs "
                                 "python3-torch):\n"
                              << ref.output;

  nlohmann::json result;
  std::ifstream(dir / "hf_result.json") >> result;
  const double ref_loss = result["loss"].get<double>();
  const double loss_error = std::abs(loss - ref_loss) / std::abs(ref_loss);
  EXPECT_LT(loss_error, kTolerance) << "loss kiln " << loss << " torch " << ref_loss;

  std::vector<float> ref_logits(logits.size());
  std::ifstream in(dir / "hf_logits.bin", std::ios::binary);
  in.read(reinterpret_cast<char*>(ref_logits.data()),
          static_cast<std::streamsize>(ref_logits.size() * sizeof(float)));
  ASSERT_EQ(static_cast<size_t>(in.gcount()), ref_logits.size() * sizeof(float))
      << "the reference's logits are not [batch * seq_len, vocab_size]";
  double diff = 0, norm = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    diff += (static_cast<double>(logits[i]) - ref_logits[i]) * (logits[i] - ref_logits[i]);
    norm += static_cast<double>(ref_logits[i]) * ref_logits[i];
  }
  const double logits_error = std::sqrt(diff / norm);
  EXPECT_LT(logits_error, kTolerance) << "logits";
  std::printf("hf export parity %s: loss %.3e, logits %.3e\n", arch.c_str(), loss_error,
              logits_error);
}

INSTANTIATE_TEST_SUITE_P(Arch, HfExportParity, testing::Values("gpt2", "llama", "mixtral", "llama3_rope", "qwen2", "qwen3", "qwen3_moe", "mistral", "gpt2_lora",
                                                           "llama_lora", "deepseek_v3", "deepseek_v3_direct_q",
                                                           "deepseek_v3_yarn"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace kiln
