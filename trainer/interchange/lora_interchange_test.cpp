// A LoRA checkpoint exported and imported: merged into the weights (each adapted weight
// W + (alpha / r) B A, the rest byte for byte the base's), as a PEFT adapter folder (the file
// layout and names PEFT's loader reads: adapter_config.json's fields, base_model.model.<module>
// .lora_A.weight [r, in] and .lora_B.weight [out, r]), and a PEFT folder read back onto an
// imported base, every adapter tensor exact; what PEFT computes and kiln does not is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/error_of.h"
#include "tests/model_checkpoint.h"
#include "tests/peft_folder.h"
#include "tests/small_model.h"
#include "trainer/interchange/hf_export.h"
#include "trainer/interchange/hf_import.h"
#include "trainer/memory/host_copy.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;

fs::path lora_fresh(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("kiln_lora_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A small Llama whose q, v and down projections carry rank-4 adapters (alpha 12: scale 3).
ModelConfig lora_model(int rank = 4) {
  ModelConfig m = test::small_model("llama", 32, 300, 16);
  if (rank > 0) {
    m.lora.rank = rank;
    m.lora.alpha = 12;
    m.lora.targets = "q,v,down";
    m.lora.dropout = 0.05;
  }
  return m;
}

// A checkpoint of the model (the base the same with or without LoRA: each parameter draws
// from its own stream), its B factors moved off zero.
std::string save_lora_model(const ModelConfig& m, const fs::path& root) {
  return test::save_test_model(m, root, [](GptModel& model) {
    Random draw(4);
    for (const Parameter& p : model.parameters().all())
      if (p.name.ends_with(".lora_b"))
        for (int64_t i = 0; i < p.value.numel(); ++i) p.value.as<float>()[i] = static_cast<float>(draw.normal());
  });
}

void expect_lora_error(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "message: \"" << message << "\" lacks \"" << part << "\"";
}

std::vector<double> tensor_values(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo& info = f.info(name);
  return doubles_from_bytes(f.data(name).data(), info.dtype, info.shape.numel());
}

TEST(LoraInterchange, ExportMergesEachAdapterIntoItsWeight) {
  const fs::path dir = lora_fresh("merged");
  const std::string saved = save_lora_model(lora_model(), dir / "run");
  export_hf(saved, (dir / "hf").string());
  const SafetensorsFile ckpt(saved + "/model.safetensors"), hf((dir / "hf" / "model.safetensors").string());
  // q_proj: rows [0, 32) of the fused qkv, plus 3 B A with A [4, 32], B [32, 4].
  const std::vector<double> qkv = tensor_values(ckpt, "layers.1.attn.qkv.weight");
  const std::vector<double> a = tensor_values(ckpt, "layers.1.attn.qkv.q.lora_a");
  const std::vector<double> b = tensor_values(ckpt, "layers.1.attn.qkv.q.lora_b");
  const std::vector<double> q = tensor_values(hf, "model.layers.1.self_attn.q_proj.weight");
  ASSERT_EQ(q.size(), 32u * 32);
  double moved = 0;
  for (int i = 0; i < 32; ++i)
    for (int c = 0; c < 32; ++c) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += b[static_cast<size_t>(i * 4 + k)] * a[static_cast<size_t>(k * 32 + c)];
      const double want = qkv[static_cast<size_t>(i * 32 + c)] + 3.0 * sum;
      // Computed in double and rounded once to F32: the nearest float, or its neighbour.
      EXPECT_NEAR(q[static_cast<size_t>(i * 32 + c)], want, 1e-6 * std::abs(want) + 1e-9) << i << ", " << c;
      moved = std::max(moved, std::abs(want - qkv[static_cast<size_t>(i * 32 + c)]));
    }
  EXPECT_GT(moved, 0.01) << "the adapter must change the weight for the test to mean anything";
  // k_proj is not adapted: the base's bytes exactly.
  const std::vector<double> k = tensor_values(hf, "model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(k, std::vector<double>(qkv.begin() + 32 * 32, qkv.begin() + 48 * 32));
  // No adapter tensor leaks into the merged model.
  for (const TensorInfo& t : hf.tensors()) EXPECT_EQ(t.name.find("lora"), std::string::npos) << t.name;
}

TEST(LoraInterchange, AdapterExportIsAPeftFolder) {
  const fs::path dir = lora_fresh("peft");
  const std::string saved = save_lora_model(lora_model(), dir / "run");
  const HfExportSummary s = export_hf(saved, (dir / "peft").string(), true);
  EXPECT_EQ(s.files, (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors"}));
  json config;
  std::ifstream(dir / "peft" / "adapter_config.json") >> config;
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 12.0);
  EXPECT_EQ(config["lora_dropout"], 0.05);
  EXPECT_EQ(config["target_modules"], json({"q_proj", "v_proj", "down_proj"}));
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["fan_in_fan_out"], false);
  EXPECT_EQ(config["use_rslora"], false);
  EXPECT_TRUE(config.contains("base_model_name_or_path"));
  const SafetensorsFile peft((dir / "peft" / "adapter_model.safetensors").string()), ckpt(saved + "/model.safetensors");
  EXPECT_EQ(peft.metadata().at("format"), "pt");
  // 2 layers x 3 adapters x 2 factors, A [r, in], B [out, r] (v: 2 key/value heads of 8).
  EXPECT_EQ(peft.tensors().size(), 12u);
  EXPECT_EQ(peft.info("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").shape, (Shape{4, 32}));
  EXPECT_EQ(peft.info("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight").shape, (Shape{32, 4}));
  EXPECT_EQ(peft.info("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight").shape, (Shape{16, 4}));
  EXPECT_EQ(peft.info("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight").shape, (Shape{4, 48}));
  EXPECT_EQ(tensor_values(peft, "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"),
            tensor_values(ckpt, "layers.1.mlp.proj.down.lora_b"));
}

TEST(LoraInterchange, ImportReadsAPeftAdapterOntoItsBase) {
  const fs::path dir = lora_fresh("import");
  // The base exported from a checkpoint without adapters, the adapter from the LoRA run:
  // both drew the base from the same seed.
  export_hf(save_lora_model(lora_model(0), dir / "base_run"), (dir / "base").string());
  const std::string tuned = save_lora_model(lora_model(), dir / "run");
  export_hf(tuned, (dir / "peft").string(), true);
  HfImportOptions options{(dir / "base").string(), (dir / "back").string(), 0};
  options.adapter = (dir / "peft").string();
  const HfImportSummary s = import_hf(options);
  const Checkpoint back(s.checkpoint);
  const ModelConfig m = config_from_json(back.state().config).model;
  EXPECT_EQ(m.lora.rank, 4);
  EXPECT_EQ(m.lora.alpha, 12.0);
  EXPECT_EQ(m.lora.targets, "q,v,down");
  EXPECT_EQ(m.lora.dropout, 0.05);  // training goes on with the adapter's dropout
  const SafetensorsFile got(s.checkpoint + "/model.safetensors"), want(tuned + "/model.safetensors");
  for (const TensorInfo& t : want.tensors()) {
    ASSERT_TRUE(got.contains(t.name)) << t.name;
    EXPECT_EQ(tensor_values(got, t.name), tensor_values(want, t.name)) << t.name;
  }
  // Zero moments for the adapters alone: the base is frozen.
  const SafetensorsFile moments(s.checkpoint + "/optimizer.safetensors");
  EXPECT_TRUE(moments.contains("exp_avg.layers.0.attn.qkv.q.lora_a"));
  EXPECT_FALSE(moments.contains("exp_avg.layers.0.attn.qkv.weight"));
}

TEST(LoraInterchange, WhatKilnDoesNotComputeIsRefusedInOneLine) {
  const fs::path dir = lora_fresh("refused");
  const std::string tuned = save_lora_model(lora_model(), dir / "run");
  export_hf(save_lora_model(lora_model(0), dir / "base_run"), (dir / "base").string());
  export_hf(tuned, (dir / "peft").string(), true);
  const auto import_with = [&](const std::string& key, const json& value) {
    const fs::path changed = test::peft_folder_with(dir / "peft", key, value);
    HfImportOptions options{(dir / "base").string(), (dir / ("back_" + key)).string(), 0};
    options.adapter = changed.string();
    return error_of([&] { import_hf(options); });
  };
  expect_lora_error(import_with("use_rslora", true), "use_rslora is true, which kiln's adapters do not compute");
  expect_lora_error(import_with("use_dora", true), "use_dora is true");
  expect_lora_error(import_with("peft_type", "IA3"), "peft_type is \"IA3\", not \"LORA\"");
  expect_lora_error(import_with("target_modules", json({"q_proj", "lm_head"})), "target_modules names lm_head");
  expect_lora_error(import_with("lora_dropout", 1.0), "lora_dropout must be a number in [0, 1), got 1.0");
  expect_lora_error(import_with("r", 8), "is [4, 32] in");
  expect_lora_error(import_with("target_modules", json({"q_proj"})), "which the adapter_config.json's target_modules do not name");
  ModelConfig gpt2 = test::small_model("gpt2", 32, 300, 16);
  gpt2.lora.rank = 4;
  gpt2.lora.targets = "q,v";
  const std::string gpt2_run = save_lora_model(gpt2, dir / "gpt2_run");
  expect_lora_error(error_of([&] { export_hf(gpt2_run, (dir / "gpt2_peft").string(), true); }),
             "PEFT adapts GPT-2's fused c_attn whole");
  expect_lora_error(error_of([&] { export_hf(save_lora_model(lora_model(0), dir / "plain"), (dir / "x").string(), true); }),
             "holds no LoRA adapters");
}

}  // namespace
}  // namespace kiln
