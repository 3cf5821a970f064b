// Export to the Hugging Face layout and import back: the tensor map names every kiln
// parameter with its shape; a checkpoint exported and imported again has every tensor
// bit for bit (both architectures, tied and untied, grouped-query heads), also from
// sharded BF16 files; what import refuses, it refuses in one line naming the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <fmt/core.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "kernels/half_convert.h"
#include "tests/byte_level_tokenizer.h"
#include "tests/error_of.h"
#include "tests/model_checkpoint.h"
#include "tests/small_model.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/interchange/hf_config.h"
#include "trainer/interchange/hf_export.h"
#include "trainer/interchange/hf_import.h"
#include "trainer/interchange/hf_shards.h"
#include "trainer/interchange/hf_tensors.h"
#include "trainer/interchange/hf_tokenizer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::error_of;

// "qwen3": llama with normalised query and key heads 12 wide (not 32 / 4); "mistral": llama
// named MistralForCausalLM, its window the whole context; "deepseek_v3": llama with latent
// attention (heads of 8 + 4 turned by RoPE, values 6, a key/value latent of 12, a query latent
// of 16 when untied and none when tied), its latent norms' eps DeepseekV3's.
ModelConfig model_of(const std::string& arch, bool tied, bool experts = false) {
  ModelConfig m = test::small_model(arch == "gpt2" ? arch : "llama", 32, 300, 16);  // padded to 384: padding rows exist
  m.tie_embeddings = tied;
  m.qk_norm = arch == "qwen3";
  m.explicit_head_dim = m.qk_norm ? 12 : 0;
  if (arch == "mistral") {
    m.family = "mistral";
    m.sliding_window = 16;
  }
  if (arch == "deepseek_v3") {
    test::use_latent_attention(m, tied ? 0 : 16, 12, 8, 4, 6);
    m.norm_eps = 1e-6;
  }
  if (experts) {  // Mixtral: 4 experts of width 24 in every layer, top 2
    m.moe.num_experts = 4;
    m.moe.top_k = 2;
    m.moe.ffn_hidden = 24;
  }
  if (experts && arch == "deepseek_v3") {  // DeepSeek's: layer 0 dense, sigmoid scores in 2 groups, a shared expert
    m.moe.dense_layers = 1;
    m.moe.score = "sigmoid";
    m.moe.route_groups = 2;
    m.moe.shared_experts = 1;
    m.moe.gate_scale = 2.5;
  }
  if (experts && m.qk_norm) {  // Qwen3-MoE: layer 0 dense, the gates not normalised
    m.moe.dense_layers = 1;
    m.moe.normalize_top_k = false;
  }
  return m;
}

struct InterchangeCase {
  std::string arch;
  bool tied;
  bool experts = false;
};

std::string name_of(const testing::TestParamInfo<InterchangeCase>& info) {
  return info.param.arch + (info.param.tied ? "_tied" : "_untied") + (info.param.experts ? "_moe" : "");
}

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("kiln_hf_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A checkpoint of a randomly initialised model, with the MoE layers' selection bias given.
std::string save_model(const ModelConfig& m, const fs::path& root,
                       const std::map<int, std::vector<double>>& expert_bias = {}) {
  return test::save_test_model(m, root, {}, expert_bias);
}

// Every tensor's bytes, by name.
std::map<std::string, std::vector<std::byte>> tensors_of(const std::string& file) {
  const SafetensorsFile f(file);
  std::map<std::string, std::vector<std::byte>> out;
  for (const TensorInfo& t : f.tensors()) {
    const auto bytes = f.data(t.name);
    out[t.name].assign(bytes.begin(), bytes.end());
  }
  return out;
}

class HfInterchange : public testing::TestWithParam<InterchangeCase> {};

TEST_P(HfInterchange, TheMapNamesEveryParameterWithItsShape) {
  const ModelConfig m = model_of(GetParam().arch, GetParam().tied, GetParam().experts);
  auto ops = make_cpu_ops(1);
  const GptModel model(m, 1, *ops);
  std::map<std::string, Shape> kiln, mapped;
  for (const Parameter& p : model.parameters().all()) kiln[p.name] = p.value.shape;
  std::set<std::string> hf_names;
  for (const HfTensor& t : hf_tensor_map(m)) {
    mapped[t.kiln_name] = t.kiln_shape;
    int64_t row = 0;
    for (const HfPart& p : t.parts) {
      EXPECT_EQ(p.row_begin, row) << t.kiln_name << ": parts must tile the rows in order";
      row = p.row_end;
      EXPECT_TRUE(hf_names.insert(p.name).second) << p.name << " named twice";
    }
    const int64_t real_rows =
        t.kiln_name == "wte" || t.kiln_name == "lm_head.weight" ? m.vocab_size : t.kiln_shape[0];
    EXPECT_EQ(row, real_rows) << t.kiln_name;
  }
  ASSERT_EQ(mapped.size(), kiln.size());
  for (const auto& [name, shape] : kiln) {
    ASSERT_TRUE(mapped.count(name)) << name << " has no Hugging Face tensor";
    EXPECT_EQ(mapped[name], shape) << name;
  }
}

TEST_P(HfInterchange, ExportThenImportGivesBackEveryTensorExactly) {
  const ModelConfig m = model_of(GetParam().arch, GetParam().tied, GetParam().experts);
  const fs::path dir = fresh("roundtrip_" + GetParam().arch + (GetParam().tied ? "_t" : "_u") +
                             (GetParam().experts ? "_moe" : ""));
  const std::string original = save_model(m, dir / "original");
  const HfExportSummary exported = export_hf(original, (dir / "hf").string());
  EXPECT_EQ(exported.files, (std::vector<std::string>{"config.json", "model.safetensors"}));

  const HfImportSummary imported = import_hf({(dir / "hf").string(), (dir / "back").string(), 0});
  EXPECT_EQ(imported.checkpoint, (dir / "back" / "step-00000000").string());
  EXPECT_EQ(imported.run_name, "back");
  EXPECT_EQ(imported.tokenizer, "byte");
  EXPECT_EQ(tensors_of(imported.checkpoint + "/model.safetensors"),
            tensors_of(original + "/model.safetensors"));

  // The checkpoint opens, resumes from step 0 with zero moments, and holds the same model.
  const Checkpoint back(find_checkpoint((dir / "back").string(), "unused"));
  EXPECT_EQ(back.state().step, 0);
  EXPECT_EQ(back.state().optimizer_steps, 0);
  const ModelConfig again = config_from_json(back.state().config).model;
  EXPECT_EQ(again.arch, m.arch);
  EXPECT_EQ(again.family, m.family);
  EXPECT_EQ(again.sliding_window, m.sliding_window);
  EXPECT_EQ(again.qk_norm, m.qk_norm);
  EXPECT_EQ(again.head_dim(), m.head_dim());
  EXPECT_EQ(again.n_layer, m.n_layer);
  EXPECT_EQ(again.kv_heads(), m.kv_heads());
  // Mixtral has no dense MLP, so no dense width to carry; Qwen3-MoE and DeepseekV3 their dense layers'.
  if (!m.moe.enabled() || GetParam().arch != "llama") {
    EXPECT_EQ(again.ffn_dim(), m.ffn_dim());
  }
  for (int l = 0; l < m.n_layer; ++l) EXPECT_EQ(again.moe.is_moe_layer(l), m.moe.is_moe_layer(l)) << "layer " << l;
  EXPECT_EQ(again.moe.normalize_top_k, m.moe.normalize_top_k);
  EXPECT_EQ(again.seq_len, m.seq_len);
  EXPECT_EQ(again.tie_embeddings, m.tie_embeddings);
  EXPECT_EQ(again.padded_vocab(), m.padded_vocab());
  EXPECT_EQ(again.moe.num_experts, m.moe.num_experts);
  EXPECT_EQ(again.moe.top_k, m.moe.top_k);
  EXPECT_EQ(again.expert_ffn_dim(), m.expert_ffn_dim());
  for (const auto& [name, bytes] : tensors_of(back.path() + "/optimizer.safetensors"))
    for (std::byte b : bytes) ASSERT_EQ(b, std::byte{0}) << name;
}

INSTANTIATE_TEST_SUITE_P(Models, HfInterchange,
                         testing::Values(InterchangeCase{"gpt2", true}, InterchangeCase{"gpt2", false},
                                         InterchangeCase{"llama", false}, InterchangeCase{"llama", true},
                                         InterchangeCase{"llama", false, true}, InterchangeCase{"qwen3", true},
                                         InterchangeCase{"qwen3", false}, InterchangeCase{"qwen3", false, true},
                                         InterchangeCase{"mistral", false}, InterchangeCase{"deepseek_v3", true},
                                         InterchangeCase{"deepseek_v3", false, true}),
                         name_of);

// The exported files re-written as two BF16 shards and an index, as large models come: the
// import keeps them BF16, bit for bit, and exports them back so; a run loads them widened.
TEST(HfImport, ReadsShardedBf16WeightsAndKeepsThemBf16) {
  const ModelConfig m = model_of("llama", false);
  const fs::path dir = fresh("sharded");
  const std::string original = save_model(m, dir / "original");
  export_hf(original, (dir / "hf").string());
  const SafetensorsFile whole((dir / "hf" / "model.safetensors").string());
  const fs::path sharded = dir / "sharded";
  fs::create_directories(sharded);
  fs::copy_file(dir / "hf" / "config.json", sharded / "config.json");
  nlohmann::json weight_map;
  std::vector<TensorInfo> shard_infos[2];
  std::map<std::string, std::vector<uint16_t>> bf16_of;
  for (size_t i = 0; i < whole.tensors().size(); ++i) {
    TensorInfo info = whole.tensors()[i];
    info.dtype = DType::BF16;
    shard_infos[i % 2].push_back(info);
    weight_map[info.name] = "model-0000" + std::to_string(i % 2 + 1) + "-of-00002.safetensors";
    const auto* values = reinterpret_cast<const float*>(whole.data(info.name).data());
    for (int64_t k = 0; k < info.shape.numel(); ++k) bf16_of[info.name].push_back(float_to_bf16(values[k]));
  }
  for (int s = 0; s < 2; ++s) {
    SafetensorsWriter writer(
        (sharded / ("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors")).string(),
        shard_infos[s]);
    for (const TensorInfo& info : shard_infos[s])
      writer.write_tensor(bf16_of[info.name].data(), bf16_of[info.name].size() * 2);
    writer.close();
  }
  std::ofstream(sharded / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump();

  const HfImportSummary imported = import_hf({sharded.string(), (dir / "back").string(), 0});
  const SafetensorsFile got(imported.checkpoint + "/model.safetensors");
  const SafetensorsFile want(original + "/model.safetensors");
  for (const TensorInfo& t : want.tensors()) {
    ASSERT_EQ(got.info(t.name).dtype, DType::BF16) << t.name;
    const auto* a = reinterpret_cast<const uint16_t*>(got.data(t.name).data());
    const auto* b = reinterpret_cast<const float*>(want.data(t.name).data());
    for (int64_t k = 0; k < t.shape.numel(); ++k)
      ASSERT_EQ(a[k], float_to_bf16(b[k])) << t.name << "[" << k << "]";  // padding rows: 0 both ways
  }
  // Exported again: BF16, the shards' bytes.
  const HfExportSummary exported = export_hf(imported.checkpoint, (dir / "hf2").string());
  EXPECT_EQ(exported.dtype, DType::BF16);
  const SafetensorsFile again((dir / "hf2" / "model.safetensors").string());
  for (const TensorInfo& t : again.tensors()) {
    EXPECT_EQ(t.dtype, DType::BF16) << t.name;
    const auto bytes = again.data(t.name);
    ASSERT_EQ(bytes.size(), bf16_of.at(t.name).size() * 2) << t.name;
    EXPECT_EQ(std::memcmp(bytes.data(), bf16_of.at(t.name).data(), bytes.size()), 0) << t.name;
  }
  // A run computing in F32 loads them widened, exactly.
  auto ops = make_cpu_ops(1);
  GptModel model(m, 1, *ops);
  Checkpoint(imported.checkpoint).load_parameters(model, *ops);
  const Parameter& qkv = model.parameters().find("layers.1.attn.qkv.weight");
  const auto* loaded = qkv.value.as<float>();
  const auto* saved = reinterpret_cast<const float*>(want.data("layers.1.attn.qkv.weight").data());
  for (int64_t k = 0; k < qkv.value.numel(); ++k)
    ASSERT_EQ(loaded[k], bf16_to_float(float_to_bf16(saved[k]))) << k;
}

// Past --max-shard-size the weights are cut as transformers cuts them, and import reads the
// shards back to the same checkpoint.
TEST(HfExport, ShardsTheWeightsAsTransformersDoes) {
  const ModelConfig m = model_of("llama", false);
  const fs::path dir = fresh("export_shards");
  const std::string original = save_model(m, dir / "original");
  const HfExportSummary single = export_hf(original, (dir / "single").string());
  const int64_t max_bytes = 20'000;  // the embedding (300 x 32 x 4 bytes) alone is larger
  const HfExportSummary exported = export_hf(original, (dir / "hf").string(), false, max_bytes);
  const SafetensorsFile whole((dir / "single" / "model.safetensors").string());
  const std::vector<HfShard> plan = plan_hf_shards(whole.tensors(), max_bytes);
  ASSERT_GT(plan.size(), 2u);
  std::vector<std::string> files = {"config.json"};
  for (size_t s = 0; s < plan.size(); ++s)
    files.push_back(fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, plan.size()));
  files.push_back("model.safetensors.index.json");
  EXPECT_EQ(exported.files, files);
  EXPECT_EQ(exported.tensors, single.tensors);

  nlohmann::json index;
  std::ifstream(dir / "hf" / "model.safetensors.index.json") >> index;
  int64_t total_size = 0;
  std::set<std::string> files_named;
  for (const TensorInfo& t : whole.tensors()) {
    total_size += t.shape.numel() * 4;
    files_named.insert(index["weight_map"].at(t.name).get<std::string>());
    const SafetensorsFile shard((dir / "hf" / index["weight_map"].at(t.name).get<std::string>()).string());
    EXPECT_EQ(shard.metadata().at("format"), "pt");
    const auto a = shard.data(t.name), b = whole.data(t.name);
    ASSERT_EQ(a.size(), b.size()) << t.name;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << t.name;
  }
  EXPECT_EQ(index["metadata"]["total_size"], total_size);
  EXPECT_EQ(index["metadata"]["total_parameters"], single.parameters);
  EXPECT_EQ(index["weight_map"].size(), whole.tensors().size());
  EXPECT_EQ(files_named.size(), plan.size());
  for (size_t s = 0; s < plan.size(); ++s) {  // none past the size but a tensor larger alone
    const SafetensorsFile shard((dir / "hf" / plan[s].file).string());
    int64_t bytes = 0;
    for (const TensorInfo& t : shard.tensors()) bytes += t.shape.numel() * 4;
    EXPECT_TRUE(bytes <= max_bytes || shard.tensors().size() == 1) << plan[s].file;
  }

  const HfImportSummary imported = import_hf({(dir / "hf").string(), (dir / "back").string(), 0});
  EXPECT_EQ(tensors_of(imported.checkpoint + "/model.safetensors"), tensors_of(original + "/model.safetensors"));
}

// huggingface_hub's own example: [6, 6, 2, 6, 2, 2] GB under 10GB are [6], [6+2], [6+2+2]; a
// tensor larger than the size has a file of its own, placed when it comes, while the one being
// filled goes on.
TEST(HfShards, PlanTheFilesAsHuggingFaceHubDoes) {
  const auto tensors = [](const std::vector<int64_t>& gigabytes) {
    std::vector<TensorInfo> out;
    for (size_t i = 0; i < gigabytes.size(); ++i)
      out.push_back({"t" + std::to_string(i), DType::E4M3, {gigabytes[i] * 1'000'000'000}});
    return out;
  };
  const auto shards_of = [](const std::vector<HfShard>& plan) {
    std::vector<std::vector<size_t>> out;
    for (const HfShard& s : plan) out.push_back(s.tensors);
    return out;
  };
  const std::vector<HfShard> plan = plan_hf_shards(tensors({6, 6, 2, 6, 2, 2}), 10'000'000'000);
  EXPECT_EQ(shards_of(plan), (std::vector<std::vector<size_t>>{{0}, {1, 2}, {3, 4, 5}}));
  EXPECT_EQ(plan[1].file, "model-00002-of-00003.safetensors");
  EXPECT_EQ(shards_of(plan_hf_shards(tensors({1, 20, 1}), 10'000'000'000)),
            (std::vector<std::vector<size_t>>{{1}, {0, 2}}));
  const std::vector<HfShard> one = plan_hf_shards(tensors({1, 2}), kHfMaxShardBytes);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].file, "model.safetensors");
}

TEST(HfShards, ParseSizesAsTransformersDoes) {
  EXPECT_EQ(parse_shard_size("5GB"), 5'000'000'000);
  EXPECT_EQ(parse_shard_size("500MB"), 500'000'000);
  EXPECT_EQ(parse_shard_size("2.5gb"), 2'500'000'000);
  EXPECT_EQ(parse_shard_size("20KB"), 20'000);
  EXPECT_EQ(parse_shard_size("1TB"), 1'000'000'000'000);
  EXPECT_EQ(parse_shard_size(" 5 GB "), 5'000'000'000);
  for (const char* bad : {"5", "5GiB", "GB", "-1GB", "0MB", "five GB", "1e3MB", "5XB"})
    EXPECT_EQ(error_of([&] { parse_shard_size(bad); }),
              std::string("export: --max-shard-size \"") + bad +
                  "\" is not a size: a number above 0 and KB, MB, GB or TB (powers of 1000, as transformers' "
                  "max_shard_size), e.g. 5GB")
        << bad;
}

// Rewrites the exported model.safetensors with its tensors changed by `edit` (which may
// rename one, reshape it, or return false to drop it), and `extra` (zeros) added.
void rewrite(const fs::path& dir, const std::function<bool(TensorInfo&)>& edit,
             const std::vector<TensorInfo>& extra = {}) {
  const fs::path file = dir / "model.safetensors";
  std::map<std::string, std::vector<std::byte>> tensors = tensors_of(file.string());
  std::vector<TensorInfo> infos;
  std::vector<const std::vector<std::byte>*> data;
  {
    const SafetensorsFile f(file.string());
    for (TensorInfo info : f.tensors()) {
      const std::string name = info.name;
      if (!edit(info)) continue;
      tensors[name].resize(static_cast<size_t>(info.shape.numel()) * dtype_size(info.dtype));
      infos.push_back(info);
      data.push_back(&tensors[name]);
    }
  }
  for (const TensorInfo& info : extra) {
    tensors[info.name].assign(static_cast<size_t>(info.shape.numel()) * dtype_size(info.dtype),
                              std::byte{0});
    infos.push_back(info);
    data.push_back(&tensors[info.name]);
  }
  fs::remove(file);
  SafetensorsWriter writer(file.string(), infos);
  for (const auto* d : data) writer.write_tensor(d->data(), d->size());
  writer.close();
}

TEST(HfImport, RefusesWhatItCannotPlaceInOneLine) {
  const fs::path dir = fresh("refused");
  const std::string original = save_model(model_of("gpt2", true), dir / "original");
  const fs::path hf = dir / "hf";
  auto import_to = [&](const std::string& out) {
    return error_of([&] { import_hf({hf.string(), (dir / out).string(), 0}); });
  };
  const std::string file = (hf / "model.safetensors").string();

  export_hf(original, hf.string());
  rewrite(hf, [](TensorInfo& t) { return t.name != "transformer.h.1.mlp.c_fc.bias"; });
  EXPECT_EQ(import_to("a"), "import: " + file + " has no tensor transformer.h.1.mlp.c_fc.bias");

  export_hf(original, hf.string());
  rewrite(hf, [](TensorInfo& t) {
    if (t.name == "transformer.h.0.attn.c_attn.weight")
      t.shape = {96, 32};  // kiln's layout, not Conv1D's
    return true;
  });
  EXPECT_EQ(import_to("b"), "import: transformer.h.0.attn.c_attn.weight is [96, 32] in " + file +
                                "; the config.json says [32, 96]");

  export_hf(original, hf.string());
  rewrite(hf, [](TensorInfo& t) {
    if (t.name == "transformer.ln_f.bias") t.name = "transformer.ln_g.bias";
    return true;
  });
  EXPECT_EQ(import_to("c"), "import: " + file + " has no tensor transformer.ln_f.bias");

  // GPT-2's causal-mask buffers are skipped; a tensor kiln has no place for is not.
  export_hf(original, hf.string());
  rewrite(hf, [](TensorInfo&) { return true; },
          {{"transformer.h.0.attn.bias", DType::F32, {1, 1, 16, 16}},
           {"transformer.h.0.attn.c_attn.lora_a", DType::F32, {4, 32}}});
  EXPECT_EQ(import_to("c2"), "import: " + file +
                                 " holds transformer.h.0.attn.c_attn.lora_a, which a kiln gpt2 "
                                 "model has no place for");

  // The original gpt2's names, without "transformer.", are found.
  export_hf(original, hf.string());
  rewrite(hf, [](TensorInfo& t) {
    if (t.name.rfind("transformer.", 0) == 0) t.name = t.name.substr(12);
    if (t.name == "h.0.ln_1.bias") t.name = "h.0.ln_3.bias";
    return true;
  });
  EXPECT_EQ(import_to("d"), "import: " + file + " has no tensor transformer.h.0.ln_1.bias");

  export_hf(original, hf.string());
  std::ofstream(hf / "config.json") << R"({"model_type": "gemma", "vocab_size": 300})";
  EXPECT_EQ(import_to("e"), "import: " + (hf / "config.json").string() +
                                ": model_type \"gemma\" is not one kiln imports (deepseek_v3, gpt2, llama, mistral, mixtral, qwen2, "
                                "qwen3, qwen3_moe)");
  std::ofstream(hf / "config.json") << R"({"model_type": "gpt2", "activation_function": "relu"})";
  EXPECT_EQ(import_to("f"), "import: " + (hf / "config.json").string() +
                                ": activation_function \"relu\" is not the tanh GELU (gelu_new) "
                                "kiln computes");
  EXPECT_EQ(error_of([&] {
              import_hf({(dir / "nowhere").string(), (dir / "g").string(), 0});
            }),
            "import: " + (dir / "nowhere").string() + " is not a folder");
  EXPECT_FALSE(fs::exists(dir / "a")) << "a refused import writes nothing";
}

TEST(HfImport, KeepsFewerLearnedPositionsWhenAsked) {
  const fs::path dir = fresh("positions");
  const std::string original = save_model(model_of("gpt2", true), dir / "original");
  export_hf(original, (dir / "hf").string());
  const HfImportSummary imported = import_hf({(dir / "hf").string(), (dir / "back").string(), 8});
  const SafetensorsFile got(imported.checkpoint + "/model.safetensors");
  const SafetensorsFile want(original + "/model.safetensors");
  EXPECT_EQ(got.info("wpe").shape, (Shape{8, 32}));
  EXPECT_EQ(
      std::vector<std::byte>(got.data("wpe").begin(), got.data("wpe").end()),
      std::vector<std::byte>(want.data("wpe").begin(), want.data("wpe").begin() + 8 * 32 * 4));
  EXPECT_EQ(error_of([&] {
              import_hf({(dir / "hf").string(), (dir / "more").string(), 17});
            }),
            "import: --seq-len 17 exceeds the 16 learned positions of " +
                (dir / "hf" / "config.json").string() + " (n_positions)");
}

TEST(HfConfig, RefusesGroupedQueryGpt2) {
  ModelConfig m = model_of("gpt2", true);
  m.n_kv_head = 2;
  EXPECT_EQ(error_of([&] { hf_config(m, DType::F32, 256); }),
            "export: GPT2LMHeadModel has no grouped-query attention, and this gpt2 model has "
            "model.n_kv_head=2 for model.n_head=4");
}

// What kiln trains but does not write yet is refused in one line, before a file is written:
// YaRN goes out with DeepseekV3ForCausalLM alone (hf_deepseek_test.cpp).
TEST(HfConfig, RefusesYarnOutsideDeepseekV3) {
  ModelConfig m = model_of("llama", true);
  m.rope_scaling = "yarn";
  EXPECT_EQ(error_of([&] { hf_config(m, DType::F32, 256); }),
            "export: model.rope_scaling=yarn is written only for DeepseekV3ForCausalLM (model.attention=mla); kiln "
            "writes llama3's for the other classes");
}

TEST(HfConfig, MixtralNamesItsExpertsAndRefusesWhatItCannotExpress) {
  const ModelConfig m = model_of("llama", false, true);
  const nlohmann::json c = hf_config(m, DType::BF16, 256);
  EXPECT_EQ(c["architectures"], nlohmann::json::array({"MixtralForCausalLM"}));
  EXPECT_EQ(c["num_local_experts"], 4);
  EXPECT_EQ(c["num_experts_per_tok"], 2);
  EXPECT_EQ(c["intermediate_size"], 24);
  std::set<std::string> names;
  for (const HfTensor& t : hf_tensor_map(m))
    for (const HfPart& p : t.parts) names.insert(p.name);
  for (const char* name : {"model.layers.1.block_sparse_moe.gate.weight",
                           "model.layers.1.block_sparse_moe.experts.3.w1.weight",
                           "model.layers.1.block_sparse_moe.experts.3.w2.weight",
                           "model.layers.1.block_sparse_moe.experts.3.w3.weight"})
    EXPECT_TRUE(names.count(name)) << name;
  EXPECT_EQ(names.count("model.layers.1.mlp.gate_proj.weight"), 0u);

  const auto refusal = [&](const std::function<void(ModelConfig&)>& change) {
    ModelConfig changed = m;
    change(changed);
    return error_of([&] { hf_config(changed, DType::F32, 256); });
  };
  EXPECT_EQ(refusal([](ModelConfig& c) { c.moe.layer_freq = 2; }),
            "export: MixtralForCausalLM has experts in every layer, and this model's layer 1 is "
            "dense; --format hf cannot express this model");
  EXPECT_EQ(refusal([](ModelConfig& c) { c.moe.shared_experts = 1; }),
            "export: MixtralForCausalLM has no shared experts, and this model has "
            "moe.shared_experts=1; --format hf cannot express this model");
  // With normalised heads it is Qwen3-MoE, which says so in its refusals.
  EXPECT_EQ(refusal([](ModelConfig& c) {
              c.qk_norm = true;
              c.moe.shared_experts = 1;
            }),
            "export: Qwen3MoeForCausalLM has no shared experts, and this model has moe.shared_experts=1; --format hf "
            "cannot express this model");
  EXPECT_EQ(refusal([](ModelConfig& c) { c.moe.gate_scale = 2.5; }),
            "export: MixtralForCausalLM does not scale its gates, and this model has moe.gate_scale=2.5; "
            "--format hf cannot express this model");
  EXPECT_EQ(refusal([](ModelConfig& c) { c.moe.route_groups = 2; }),
            "export: MixtralForCausalLM routes each token over every expert, and this model over 1 of its "
            "moe.route_groups=2; --format hf cannot express this model");
  EXPECT_EQ(refusal([](ModelConfig& c) { c.moe.score = "sigmoid"; }),
            "export: MixtralForCausalLM scores its router by softmax, and this model has "
            "moe.score=sigmoid; --format hf cannot express this model");
  EXPECT_EQ(refusal([](ModelConfig& c) { c.moe.normalize_top_k = false; }),
            "export: MixtralForCausalLM divides the top-k gates by their sum, and this model has "
            "moe.normalize_top_k=false; --format hf cannot express this model");
  EXPECT_EQ(refusal([](ModelConfig& c) { c.arch = "gpt2"; c.n_kv_head = 0; }),
            "export: MixtralForCausalLM has Llama-style layers with SwiGLU experts, and this model "
            "is model.arch=gpt2; --format hf cannot express this model");
}

TEST(HfConfig, MixtralImportsWithItsDefaultsAndKeepsItsWindow) {
  const nlohmann::json given = {{"model_type", "mixtral"}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                                {"num_attention_heads", 4}, {"vocab_size", 300},
                                {"max_position_embeddings", 32}};
  const ModelConfig m = model_from_hf_config(given, "config.json");
  EXPECT_EQ(m.arch, "llama");
  EXPECT_EQ(m.moe.num_experts, 8);
  EXPECT_EQ(m.moe.top_k, 2);
  EXPECT_EQ(m.expert_ffn_dim(), 14336);
  EXPECT_EQ(m.n_kv_head, 8);
  EXPECT_EQ(m.rope_theta, 1e6);
  EXPECT_TRUE(m.moe.is_moe_layer(1));
  EXPECT_EQ(m.sliding_window, 0);  // MixtralConfig's default: none
  nlohmann::json windowed = given;
  windowed["sliding_window"] = 16;  // kept; kiln import refuses it below the context it trains at
  EXPECT_EQ(model_from_hf_config(windowed, "config.json").sliding_window, 16);
}

TEST(HfConfig, Qwen3MoeImportsItsSparseLayersAndDefaults) {
  nlohmann::json given = {{"model_type", "qwen3_moe"}, {"hidden_size", 64},  {"num_hidden_layers", 6},
                          {"num_attention_heads", 4},   {"head_dim", 16},    {"vocab_size", 300},
                          {"max_position_embeddings", 32}};
  ModelConfig m = model_from_hf_config(given, "config.json");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.moe.num_experts, 128);  // Qwen3-30B-A3B's
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.expert_ffn_dim(), 768);
  EXPECT_FALSE(m.moe.normalize_top_k);  // norm_topk_prob's default
  for (int l = 0; l < 6; ++l) EXPECT_TRUE(m.moe.is_moe_layer(l));
  // Every second layer from layer 1, less layer 3: a list.
  given["decoder_sparse_step"] = 2;
  given["mlp_only_layers"] = {3};
  m = model_from_hf_config(given, "config.json");
  EXPECT_EQ(m.moe.layers, "1,5");
  // The first two dense, the rest sparse: moe.dense_layers.
  given["decoder_sparse_step"] = 1;
  given["mlp_only_layers"] = {0, 1};
  m = model_from_hf_config(given, "config.json");
  EXPECT_EQ(m.moe.dense_layers, 2);
  EXPECT_EQ(m.moe.layers, "");
  given["mlp_only_layers"] = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(error_of([&] { model_from_hf_config(given, "config.json"); }),
            "import: config.json: no layer has experts (decoder_sparse_step, mlp_only_layers)");
  given["mlp_only_layers"] = {7};
  EXPECT_EQ(error_of([&] { model_from_hf_config(given, "config.json"); }),
            "import: config.json: mlp_only_layers has 7, not a layer of the 6");
}

TEST(HfConfig, Llama3RopeScalingGoesThereAndBack) {
  // Llama 3.2 1B's config.json, the fields that matter here.
  const nlohmann::json given = {
      {"model_type", "llama"}, {"hidden_size", 2048}, {"intermediate_size", 8192},
      {"num_hidden_layers", 16}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
      {"vocab_size", 128256}, {"max_position_embeddings", 131072}, {"rope_theta", 500000.0},
      {"tie_word_embeddings", true},
      {"rope_scaling", {{"factor", 32.0}, {"high_freq_factor", 4.0}, {"low_freq_factor", 1.0},
                        {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}}}};
  const ModelConfig m = model_from_hf_config(given, "config.json");
  EXPECT_EQ(m.rope_scaling, "llama3");
  EXPECT_EQ(m.rope_scaling_factor, 32.0);
  EXPECT_EQ(m.rope_low_freq_factor, 1.0);
  EXPECT_EQ(m.rope_high_freq_factor, 4.0);
  EXPECT_EQ(m.rope_original_seq_len, 8192);
  EXPECT_EQ(hf_config(m, DType::BF16, 128001)["rope_scaling"], given["rope_scaling"]);
  ModelConfig plain = m;
  plain.rope_scaling = "none";
  EXPECT_TRUE(hf_config(plain, DType::BF16, 128001)["rope_scaling"].is_null());
  nlohmann::json yarn = given;
  yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(error_of([&] { model_from_hf_config(yarn, "config.json"); }),
            "import: config.json: rope_scaling's rope_type \"yarn\" is not one kiln computes (llama3)");
  yarn["rope_scaling"] = "llama3";
  EXPECT_EQ(error_of([&] { model_from_hf_config(yarn, "config.json"); }),
            "import: config.json: rope_scaling is \"llama3\", not an object");
}

TEST(HfConfig, Qwen2IsLlamaWithQueryKeyAndValueBiases) {
  const nlohmann::json given = {{"model_type", "qwen2"}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                                {"num_attention_heads", 4}, {"num_key_value_heads", 2}};
  const ModelConfig m = model_from_hf_config(given, "config.json");
  EXPECT_EQ(m.arch, "llama");
  EXPECT_TRUE(m.attention_bias);
  EXPECT_EQ(m.vocab_size, 151936);  // Qwen2Config's defaults where the file is silent
  EXPECT_EQ(m.ffn_dim(), 22016);
  EXPECT_EQ(m.seq_len, 32768);
  const nlohmann::json back = hf_config(m, DType::BF16, 151643);
  EXPECT_EQ(back["model_type"], "qwen2");
  EXPECT_EQ(back["architectures"], nlohmann::json::array({"Qwen2ForCausalLM"}));
  const std::vector<HfTensor> tensors = hf_tensor_map(m);
  const auto qkv_bias = std::find_if(tensors.begin(), tensors.end(),
                                     [](const HfTensor& t) { return t.kiln_name == "layers.0.attn.qkv.bias"; });
  ASSERT_NE(qkv_bias, tensors.end());
  EXPECT_EQ(qkv_bias->parts.size(), 3u);
  EXPECT_EQ(qkv_bias->parts[1].name, "model.layers.0.self_attn.k_proj.bias");
  nlohmann::json windowed = given;
  windowed["use_sliding_window"] = true;
  EXPECT_EQ(error_of([&] { model_from_hf_config(windowed, "config.json"); }),
            "import: config.json: use_sliding_window is true; kiln's attention sees the whole sequence");
}

TEST(HfConfig, Qwen3IsLlamaWithNormalisedHeadsOfTheirOwnWidth) {
  const nlohmann::json given = {{"model_type", "qwen3"}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                                {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                                {"tie_word_embeddings", true}};
  const ModelConfig m = model_from_hf_config(given, "config.json");
  EXPECT_EQ(m.arch, "llama");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.attention_bias);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_EQ(m.head_dim(), 128);  // Qwen3Config's defaults where the file is silent
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_EQ(m.ffn_dim(), 22016);
  EXPECT_EQ(m.seq_len, 32768);
  EXPECT_EQ(m.norm_eps, 1e-6);
  const nlohmann::json back = hf_config(m, DType::BF16, 151643);
  EXPECT_EQ(back["model_type"], "qwen3");
  EXPECT_EQ(back["architectures"], nlohmann::json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(back["head_dim"], 128);
  EXPECT_EQ(back["attention_bias"], false);
  EXPECT_EQ(back["use_sliding_window"], false);
  EXPECT_EQ(model_from_hf_config(back, "config.json").head_dim(), 128);
  // A head_dim that is hidden_size / num_attention_heads is kiln's own default.
  nlohmann::json even = given;
  even["head_dim"] = 16;
  EXPECT_EQ(model_from_hf_config(even, "config.json").explicit_head_dim, 0);

  const std::vector<HfTensor> tensors = hf_tensor_map(m);
  const auto k_norm = std::find_if(tensors.begin(), tensors.end(),
                                   [](const HfTensor& t) { return t.kiln_name == "layers.1.attn.k_norm.weight"; });
  ASSERT_NE(k_norm, tensors.end());
  EXPECT_EQ(k_norm->kiln_shape, (Shape{128}));
  EXPECT_EQ(k_norm->parts.front().name, "model.layers.1.self_attn.k_norm.weight");
  const auto qkv = std::find_if(tensors.begin(), tensors.end(),
                                [](const HfTensor& t) { return t.kiln_name == "layers.0.attn.qkv.weight"; });
  EXPECT_EQ(qkv->kiln_shape, (Shape{(4 + 2 * 2) * 128, 64}));

  const auto refused = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json changed = given;
    changed[key] = value;
    return error_of([&] { model_from_hf_config(changed, "config.json"); });
  };
  EXPECT_EQ(refused("use_sliding_window", true),
            "import: config.json: use_sliding_window is true; kiln's attention sees the whole sequence");
  EXPECT_EQ(refused("layer_types", {"full_attention", "sliding_attention"}),
            "import: config.json: layer_types has \"sliding_attention\"; kiln's layers all attend to the whole "
            "sequence (full_attention)");
  EXPECT_EQ(refused("layer_types", "full_attention"), "import: config.json: layer_types is \"full_attention\", not an array");
  EXPECT_EQ(refused("layer_types", {"full_attention", "full_attention"}), "(no error)");
  EXPECT_EQ(refused("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}),
            "import: config.json: rope_scaling's rope_type \"yarn\" is not one kiln computes (llama3)");
  EXPECT_EQ(refused("attention_bias", true),
            "import: config.json: attention_bias is true; kiln's Llama layers have no biases");
  // transformers 5 writes rope_theta inside rope_parameters.
  nlohmann::json parameters = given;
  parameters["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  EXPECT_EQ(model_from_hf_config(parameters, "config.json").rope_theta, 1000000.0);
  parameters["rope_parameters"]["rope_type"] = "dynamic";
  EXPECT_EQ(error_of([&] { model_from_hf_config(parameters, "config.json"); }),
            "import: config.json: rope_parameters's rope_type \"dynamic\" is not one kiln computes (llama3)");

  ModelConfig biased = m;
  biased.attention_bias = true;
  EXPECT_EQ(error_of([&] { hf_config(biased, DType::BF16, 0); }),
            "export: Qwen3ForCausalLM's attention_bias puts a bias on o_proj too, and this model has "
            "model.attention_bias=true with model.qk_norm=true (query, key and value biases only); "
            "--format hf cannot express this model");
}

TEST(HfConfig, MistralKeepsItsFamilyAndWindowBothWays) {
  const nlohmann::json given = {{"model_type", "mistral"}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                                {"num_attention_heads", 8}, {"vocab_size", 300},
                                {"max_position_embeddings", 32}, {"sliding_window", 32}};
  const ModelConfig m = model_from_hf_config(given, "config.json");
  EXPECT_EQ(m.arch, "llama");
  EXPECT_EQ(m.family, "mistral");
  EXPECT_EQ(m.sliding_window, 32);
  EXPECT_EQ(m.n_kv_head, 8);  // MistralConfig's defaults where the file is silent
  EXPECT_EQ(m.ffn_dim(), 14336);
  const nlohmann::json back = hf_config(m, DType::BF16, 2);
  EXPECT_EQ(back["architectures"], nlohmann::json::array({"MistralForCausalLM"}));
  EXPECT_EQ(back["model_type"], "mistral");
  EXPECT_EQ(back["sliding_window"], 32);
  EXPECT_FALSE(back.contains("pretraining_tp"));  // LlamaConfig's, not MistralConfig's
  EXPECT_EQ(model_from_hf_config(back, "config.json").sliding_window, 32);

  // null is no window; a file without the key has MistralConfig's 4096.
  nlohmann::json unwindowed = given;
  unwindowed["sliding_window"] = nullptr;
  const ModelConfig none = model_from_hf_config(unwindowed, "config.json");
  EXPECT_EQ(none.sliding_window, 0);
  EXPECT_EQ(hf_config(none, DType::F32, 2)["sliding_window"], nullptr);
  unwindowed.erase("sliding_window");
  EXPECT_EQ(model_from_hf_config(unwindowed, "config.json").sliding_window, 4096);

  // Mixtral keeps its window (MixtralConfig's default: none) and is named by its experts.
  nlohmann::json mixtral = given;
  mixtral["model_type"] = "mixtral";
  const ModelConfig experts = model_from_hf_config(mixtral, "config.json");
  EXPECT_EQ(experts.family, "");
  EXPECT_EQ(experts.sliding_window, 32);
  EXPECT_EQ(hf_config(experts, DType::F32, 2)["sliding_window"], 32);
  mixtral.erase("sliding_window");
  EXPECT_EQ(model_from_hf_config(mixtral, "config.json").sliding_window, 0);
}

// A window below the context the import trains at is refused; a shorter --seq-len takes it.
TEST(HfImport, TakesASlidingWindowOnlyAsLongAsTheContext) {
  const fs::path dir = fresh("windowed");
  ModelConfig m = model_of("llama", false);
  m.family = "mistral";
  m.sliding_window = 16;
  const std::string original = save_model(m, dir / "original");
  export_hf(original, (dir / "hf").string());
  nlohmann::json config;
  std::ifstream(dir / "hf" / "config.json") >> config;
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"MistralForCausalLM"}));
  EXPECT_EQ(config["sliding_window"], 16);
  config["sliding_window"] = 8;
  std::ofstream(dir / "hf" / "config.json") << config.dump();
  const std::string file = (dir / "hf" / "config.json").string();
  EXPECT_EQ(error_of([&] { import_hf({(dir / "hf").string(), (dir / "a").string(), 0}); }),
            "import: " + file + ": sliding_window 8 is below the context of 16 tokens; kiln's attention sees the "
            "whole sequence, which is the window's only up to its length: import with --seq-len 8 or less");
  const HfImportSummary imported = import_hf({(dir / "hf").string(), (dir / "b").string(), 8});
  const ModelConfig back = config_from_json(Checkpoint(imported.checkpoint).state().config).model;
  EXPECT_EQ(back.family, "mistral");
  EXPECT_EQ(back.sliding_window, 8);
  EXPECT_EQ(back.seq_len, 8);
}

// An imported tokenizer's tokenizer_config.json (its special tokens, add_bos_token, chat
// template, class) is what it was read with: export writes it back, the context the model's.
TEST(HfExport, WritesAnImportedTokenizersConfigBackAsItCame) {
  const fs::path dir = fresh("tokenizer_config");
  fs::create_directories(dir / "tokenizer");
  const nlohmann::json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                 {"bos_token", "<|begin_of_text|>"},
                                 {"eos_token", "<|end_of_text|>"},
                                 {"add_bos_token", true},
                                 {"chat_template", "{{ messages[0]['content'] }}"},
                                 {"model_max_length", 131072}};
  test::write_byte_level_tokenizer((dir / "tokenizer").string(), {"<|begin_of_text|>", "<|end_of_text|>"}, config);
  const std::string spec = (dir / "tokenizer").string();
  fs::create_directories(dir / "out");
  const std::vector<std::string> written = write_hf_tokenizer(spec, *load_tokenizer(spec), 16, (dir / "out").string());
  EXPECT_EQ(written, (std::vector<std::string>{"tokenizer.json", "tokenizer_config.json"}));
  nlohmann::json back;
  std::ifstream(dir / "out" / "tokenizer_config.json") >> back;
  nlohmann::json want = config;
  want["model_max_length"] = 16;
  EXPECT_EQ(back, want);
}

TEST(HfExport, RefusesASelectionBiasMixtralCannotHold) {
  const fs::path dir = fresh("biased");
  const std::string saved =
      save_model(model_of("llama", false, true), dir / "ckpt", {{1, {0.0, 0.01, -0.01, 0.0}}});
  EXPECT_EQ(error_of([&] { export_hf(saved, (dir / "hf").string()); }),
            "export: " + saved + " chooses layer 1's experts with a selection bias "
            "(moe.bias_update_rate), which MixtralForCausalLM's router cannot hold");
  EXPECT_FALSE(fs::exists(dir / "hf"));
}

}  // namespace
}  // namespace kiln
