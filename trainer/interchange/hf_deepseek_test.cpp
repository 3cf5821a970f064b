// DeepseekV3ForCausalLM both ways: its config's fields there and back, and each refusal in one
// line; the rotary rows interleaved in the file and back in kiln's order (or left as they are
// when the file says rope_interleave false); the selection bias as e_score_correction_bias;
// a model's multi-token prediction modules out and back as DeepSeek's layers, and those a DeepSeek checkpoint
// carries skipped on import. The
// map and the bit-for-bit round trip are hf_interchange_test.cpp's deepseek_v3 cases; the
// export read by PyTorch is tests/hf_export_parity_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/error_of.h"
#include "tests/model_checkpoint.h"
#include "tests/small_model.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/interchange/hf_config.h"
#include "trainer/interchange/hf_export.h"
#include "trainer/interchange/hf_import.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;

// DeepSeek-V3's shape cut down: 4 heads of 8 + 4 dims turned by RoPE, values 6, a query latent
// of 16 (or none) and a key/value latent of 12; with experts, layer 0 dense and 8 sigmoid-scored
// experts of width 8 in 4 groups, a token's 4 from its 2 best groups, 2 shared experts, the
// gates scaled by 2.5 and not normalised.
ModelConfig deepseek_model(bool q_latent, bool experts) {
  ModelConfig m = test::small_model("llama", 32, 300, 16);
  test::use_latent_attention(m, q_latent ? 16 : 0, 12, 8, 4, 6);
  m.norm_eps = 1e-6;
  if (experts) {
    test::use_deepseek_experts(m, 8, 8);
    m.moe.normalize_top_k = false;
  }
  return m;
}

fs::path deepseek_dir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("kiln_hf_deepseek_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The model and moe sections a model is written with: what must come back.
json sections_of(const ModelConfig& m) {
  Config c;
  c.model = m;
  const json j = config_to_json(c);
  return {{"model", j["model"]}, {"moe", j["moe"]}};
}

// Row r of a 2-D F32 tensor of a safetensors file.
std::vector<float> row_of(const SafetensorsFile& file, const std::string& name, int64_t r) {
  const int64_t cols = file.info(name).shape[1];
  const auto* values = reinterpret_cast<const float*>(file.data(name).data()) + r * cols;
  return {values, values + cols};
}

TEST(HfDeepseek, ConfigHasDeepseekV3sFieldsAndComesBack) {
  const ModelConfig m = deepseek_model(true, true);
  const json c = hf_config(m, DType::BF16, 256);
  const json want = {{"architectures", {"DeepseekV3ForCausalLM"}},
                     {"model_type", "deepseek_v3"},
                     {"vocab_size", 300},
                     {"hidden_size", 32},
                     {"intermediate_size", 48},
                     {"moe_intermediate_size", 8},
                     {"num_hidden_layers", 2},
                     {"num_attention_heads", 4},
                     {"num_key_value_heads", 4},
                     {"n_shared_experts", 2},
                     {"n_routed_experts", 8},
                     {"routed_scaling_factor", 2.5},
                     {"kv_lora_rank", 12},
                     {"q_lora_rank", 16},
                     {"qk_rope_head_dim", 4},
                     {"v_head_dim", 6},
                     {"qk_nope_head_dim", 8},
                     {"n_group", 4},
                     {"topk_group", 2},
                     {"num_experts_per_tok", 4},
                     {"first_k_dense_replace", 1},
                     {"norm_topk_prob", false},
                     {"max_position_embeddings", 16},
                     {"rms_norm_eps", 1e-6},
                     {"rope_theta", 10000.0},
                     {"rope_scaling", nullptr},
                     {"rope_interleave", true},
                     {"tie_word_embeddings", false},
                     {"hidden_act", "silu"},
                     {"attention_bias", false},
                     {"torch_dtype", "bfloat16"}};
  for (const auto& [key, value] : want.items()) EXPECT_EQ(c.value(key, json("absent")), value) << key;
  EXPECT_EQ(sections_of(model_from_hf_config(c, "config.json")), sections_of(m));

  // Without the query's latent or experts: q_lora_rank and the experts' fields null, every
  // layer dense.
  const ModelConfig plain = deepseek_model(false, false);
  const json p = hf_config(plain, DType::F32, 256);
  EXPECT_EQ(p["q_lora_rank"], nullptr);
  EXPECT_EQ(p["n_routed_experts"], nullptr);
  EXPECT_EQ(p["first_k_dense_replace"], 2);
  EXPECT_EQ(sections_of(model_from_hf_config(p, "config.json")), sections_of(plain));
}

// YaRN goes out as DeepSeek writes it: max_position_embeddings the stretched context, so that
// transformers before 5 (which takes the factor as their ratio) and after (the factor) agree.
TEST(HfDeepseek, YarnGoesOutAtItsStretchedContextAndComesBack) {
  ModelConfig m = deepseek_model(true, false);
  test::use_short_yarn(m);
  m.rope_original_seq_len = 8;
  const json c = hf_config(m, DType::F32, 256);
  EXPECT_EQ(c["max_position_embeddings"], 32);
  EXPECT_EQ(c["rope_scaling"], (json{{"rope_type", "yarn"},
                                     {"factor", 4.0},
                                     {"original_max_position_embeddings", 8},
                                     {"beta_fast", 4.0},
                                     {"beta_slow", 0.5},
                                     {"mscale", 1.0},
                                     {"mscale_all_dim", 0.7}}));
  ModelConfig stretched = m;
  stretched.seq_len = 32;  // what the import reads, to be trained at with --seq-len
  EXPECT_EQ(sections_of(model_from_hf_config(c, "config.json")), sections_of(stretched));

  // transformers 5's rope_parameters, rope_theta inside; the mscales none where absent.
  json v5 = c;
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 50000.0}, {"factor", 4.0},
                           {"original_max_position_embeddings", 8}};
  const ModelConfig from_v5 = model_from_hf_config(v5, "config.json");
  EXPECT_EQ(from_v5.rope_theta, 50000.0);
  EXPECT_EQ(from_v5.rope_beta_fast, 32.0);
  EXPECT_EQ(from_v5.rope_beta_slow, 1.0);
  EXPECT_EQ(from_v5.rope_mscale, 0.0);
  EXPECT_EQ(from_v5.rope_mscale_all_dim, 0.0);

  const auto refused = [&](const json& scaling) {
    json changed = c;
    changed["rope_scaling"] = scaling;
    return error_of([&] { model_from_hf_config(changed, "config.json"); });
  };
  EXPECT_EQ(refused({{"rope_type", "yarn"}, {"factor", 5.0}, {"original_max_position_embeddings", 8}}),
            "import: config.json: rope_scaling's factor 5 is not max_position_embeddings / "
            "original_max_position_embeddings = 32 / 8, which transformers before 5 take for it");
  EXPECT_EQ(refused({{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 8},
                     {"attention_factor", 1.2}}),
            "import: config.json: rope_scaling sets attention_factor; kiln derives YaRN's from mscale and mscale_all_dim");
  EXPECT_EQ(refused({{"rope_type", "llama3"}, {"factor", 4.0}}),
            "import: config.json: rope_scaling's rope_type \"llama3\" is not one kiln computes for DeepseekV3 (yarn)");

  ModelConfig odd = m;
  odd.rope_scaling_factor = 2.5;
  odd.rope_original_seq_len = 7;
  EXPECT_EQ(error_of([&] { hf_config(odd, DType::F32, 256); }),
            "export: DeepseekV3ForCausalLM reads YaRN's factor as max_position_embeddings / "
            "original_max_position_embeddings (before transformers 5), and this model's model.rope_scaling_factor=2.5 "
            "x model.rope_original_seq_len=7 is no whole number of positions; --format hf cannot express this model");
}

TEST(HfDeepseek, ExportRefusesWhatTheClassComputesOtherwise) {
  const auto refusal = [](const std::function<void(ModelConfig&)>& change) {
    ModelConfig m = deepseek_model(true, true);
    change(m);
    return error_of([&] { hf_config(m, DType::F32, 256); });
  };
  const std::string tail = "; --format hf cannot express this model";
  EXPECT_EQ(refusal([](ModelConfig& m) { m.norm_eps = 1e-5; }),
            "export: DeepseekV3ForCausalLM normalises the query and key/value latents with eps 1e-6 whatever "
            "rms_norm_eps says, and this model has model.norm_eps=1e-05 (its latent norms take it)" + tail);
  EXPECT_EQ(refusal([](ModelConfig& m) { m.rope_scaling = "llama3"; }),
            "export: DeepseekV3ForCausalLM is written with YaRN's rope_scaling or none, and this model has "
            "model.rope_scaling=llama3" + tail);
  EXPECT_EQ(refusal([](ModelConfig& m) {
              m.n_layer = 3;
              m.moe.dense_layers = 0;
              m.moe.layers = "1";
            }),
            "export: DeepseekV3ForCausalLM has experts in every layer from its first with experts "
            "(first_k_dense_replace) on, and this model's layer 2 is dense" + tail);
  EXPECT_EQ(refusal([](ModelConfig& m) { m.moe.score = "softmax"; }),
            "export: DeepseekV3ForCausalLM scores its router by sigmoid, and this model has moe.score=softmax" + tail);
  EXPECT_EQ(refusal([](ModelConfig& m) { m.moe.shared_experts = 0; }),
            "export: DeepseekV3ForCausalLM has shared experts in every layer with experts, and this model has "
            "moe.shared_experts=0" + tail);
  // kiln scores a group by its best top_k / route_groups_topk; transformers by its best 2.
  EXPECT_EQ(refusal([](ModelConfig& m) { m.moe.route_groups_topk = 1; }),
            "export: DeepseekV3ForCausalLM scores each group of experts by its best 2 biased scores, and this "
            "model by its best moe.top_k / moe.route_groups_topk = 4 / 1" + tail);
  EXPECT_EQ(refusal([](ModelConfig& m) { m.sliding_window = 16; }),
            "export: DeepseekV3ForCausalLM has no attention window, and this model has model.sliding_window=16" + tail);
  // Without groups any top_k goes.
  EXPECT_EQ(refusal([](ModelConfig& m) {
              m.moe.route_groups = 1;
              m.moe.route_groups_topk = 1;
            }),
            "(no error)");
}

TEST(HfDeepseek, ImportTakesDeepseekV3sDefaultsAndRefusesWhatKilnComputesOtherwise) {
  const ModelConfig v3 = model_from_hf_config({{"model_type", "deepseek_v3"}}, "config.json");
  EXPECT_EQ(v3.attention, "mla");
  EXPECT_EQ(v3.n_layer, 61);
  EXPECT_EQ(v3.d_model, 7168);
  EXPECT_EQ(v3.q_lora_rank, 1536);
  EXPECT_EQ(v3.kv_lora_rank, 512);
  EXPECT_EQ(v3.head_dim(), 192);
  EXPECT_EQ(v3.moe.num_experts, 256);
  EXPECT_EQ(v3.moe.top_k, 8);
  EXPECT_EQ(v3.moe.route_groups, 8);
  EXPECT_EQ(v3.moe.route_groups_topk, 4);
  EXPECT_EQ(v3.moe.dense_layers, 3);
  EXPECT_EQ(v3.moe.shared_experts, 1);
  EXPECT_EQ(v3.moe.gate_scale, 2.5);
  EXPECT_EQ(v3.moe.score, "sigmoid");
  EXPECT_EQ(v3.norm_eps, 1e-6);

  const json given = hf_config(deepseek_model(true, true), DType::F32, 256);
  const auto refused = [&](const char* key, const json& value) {
    json changed = given;
    changed[key] = value;
    return error_of([&] { model_from_hf_config(changed, "config.json"); });
  };
  EXPECT_EQ(refused("topk_group", 1),
            "import: config.json: num_experts_per_tok 4 over topk_group 1: transformers' DeepseekV3 scores each "
            "group by its best 2 experts, kiln by its best num_experts_per_tok / topk_group");
  EXPECT_EQ(refused("num_key_value_heads", 2),
            "import: config.json: num_key_value_heads is 2; latent attention has a key and value head for every "
            "query head (num_attention_heads)");
  EXPECT_EQ(refused("rms_norm_eps", 1e-5),
            "import: config.json: rms_norm_eps is 1e-05; transformers' DeepseekV3 normalises the latents with 1e-6 "
            "whatever it says, kiln with it");
  EXPECT_EQ(refused("quantization_config", {{"quant_method", "fp8"}}),
            "import: config.json has a quantization_config: kiln imports floating-point weights (dequantize the "
            "checkpoint to bf16 first)");
  EXPECT_EQ(refused("moe_layer_freq", 2),
            "import: config.json: moe_layer_freq is 2; transformers' DeepseekV3 puts experts in every layer from "
            "first_k_dense_replace on");
  EXPECT_EQ(refused("rope_interleave", "yes"), "import: config.json: rope_interleave is \"yes\", not a boolean");
  // first_k_dense_replace past the last layer: a dense model, the experts' fields unread.
  json dense = given;
  dense["first_k_dense_replace"] = 2;
  dense["topk_group"] = 1;
  EXPECT_EQ(model_from_hf_config(dense, "config.json").moe.num_experts, 0);
}

// The file holds the rotary rows in pairs and the selection bias as F32; import puts both back.
TEST(HfDeepseek, ExportInterleavesTheRotaryRowsAndWritesTheSelectionBias) {
  const ModelConfig m = deepseek_model(true, true);
  const fs::path dir = deepseek_dir("bias");
  std::vector<double> bias;
  for (int e = 0; e < 8; ++e) bias.push_back(0.01 * (e - 3.5) + 1e-9);  // no float holds it exactly
  const std::string original = test::save_test_model(m, dir / "original", {}, {{1, bias}});
  export_hf(original, (dir / "hf").string());

  const SafetensorsFile hf((dir / "hf" / "model.safetensors").string());
  const SafetensorsFile kiln(original + "/model.safetensors");
  const std::string name = "model.layers.1.mlp.gate.e_score_correction_bias";
  ASSERT_EQ(hf.info(name).dtype, DType::F32);
  ASSERT_EQ(hf.info(name).shape, (Shape{8}));
  const auto* written = reinterpret_cast<const float*>(hf.data(name).data());
  for (int e = 0; e < 8; ++e) EXPECT_EQ(written[e], static_cast<float>(bias[static_cast<size_t>(e)])) << e;
  for (const TensorInfo& t : hf.tensors()) EXPECT_EQ(t.name.find("layers.0.mlp.gate.e_score"), std::string::npos) << t.name;

  // kv_a_proj_with_mqa: the key/value latent's 12 rows as kiln's (after the query latent's 16),
  // then the rotary key's file row 2i is kiln's i, its 2i + 1 kiln's i + 2.
  const std::string kv_a = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight";
  const std::string down = "layers.0.attn.down.weight";
  const int64_t rq = 16, rkv = 12;
  for (int64_t r = 0; r < rkv; ++r) EXPECT_EQ(row_of(hf, kv_a, r), row_of(kiln, down, rq + r)) << r;
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(row_of(hf, kv_a, rkv + 2 * i), row_of(kiln, down, rq + rkv + i)) << i;
    EXPECT_EQ(row_of(hf, kv_a, rkv + 2 * i + 1), row_of(kiln, down, rq + rkv + 2 + i)) << i;
  }
  // q_b_proj: in each head of 8 + 4 the same in its last 4 rows.
  const std::string q_b = "model.layers.1.self_attn.q_b_proj.weight", q_up = "layers.1.attn.q_up.weight";
  for (int64_t h = 0; h < 4; ++h) {
    const int64_t head = h * 12;
    EXPECT_EQ(row_of(hf, q_b, head + 7), row_of(kiln, q_up, head + 7)) << h;
    EXPECT_EQ(row_of(hf, q_b, head + 8 + 1), row_of(kiln, q_up, head + 8 + 2)) << h;
    EXPECT_EQ(row_of(hf, q_b, head + 8 + 2), row_of(kiln, q_up, head + 8 + 1)) << h;
  }

  const HfImportSummary imported = import_hf({(dir / "hf").string(), (dir / "back").string(), 0});
  const Checkpoint back(imported.checkpoint);
  ASSERT_EQ(back.state().expert_bias.size(), 1u);
  const std::vector<double>& got = back.state().expert_bias.at(1);
  for (int e = 0; e < 8; ++e)
    EXPECT_EQ(got[static_cast<size_t>(e)], static_cast<double>(static_cast<float>(bias[static_cast<size_t>(e)]))) << e;
  const SafetensorsFile again(imported.checkpoint + "/model.safetensors");
  for (const std::string& t : {down, q_up})
    for (int64_t r = 0; r < kiln.info(t).shape[0]; ++r) ASSERT_EQ(row_of(again, t, r), row_of(kiln, t, r)) << t << " " << r;
  // And out again: the same bias, bit for bit.
  export_hf(imported.checkpoint, (dir / "hf2").string());
  const SafetensorsFile hf2((dir / "hf2" / "model.safetensors").string());
  EXPECT_TRUE(std::equal(hf2.data(name).begin(), hf2.data(name).end(), hf.data(name).begin()));
}

// A model's multi-token prediction modules (model.mtp_depth) go out as DeepSeek's checkpoints
// keep them, a layer past num_hidden_layers with copies of the embedding and the head, and
// come back in: every tensor and selection bias bit for bit. A copy that differs is refused.
TEST(HfDeepseek, PredictionModulesGoOutAsDeepSeeksLayersAndComeBack) {
  ModelConfig m = deepseek_model(true, true);
  m.mtp_depth = 1;
  const fs::path dir = deepseek_dir("mtp_export");
  const std::string original = test::save_test_model(m, dir / "original", {}, {{1, std::vector<double>(8, 0.01)},
                                                                                {2, std::vector<double>(8, 0.02)}});
  const HfExportSummary exported = export_hf(original, (dir / "hf").string());
  EXPECT_TRUE(exported.notes.empty());
  json config;
  std::ifstream(dir / "hf" / "config.json") >> config;
  EXPECT_EQ(config["num_nextn_predict_layers"], 1);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  const SafetensorsFile hf((dir / "hf" / "model.safetensors").string());
  const auto same = [&](const std::string& a, const std::string& b) {
    return std::equal(hf.data(a).begin(), hf.data(a).end(), hf.data(b).begin(), hf.data(b).end());
  };
  EXPECT_TRUE(same("model.layers.2.embed_tokens.weight", "model.embed_tokens.weight"));
  EXPECT_TRUE(same("model.layers.2.shared_head.head.weight", "lm_head.weight"));
  EXPECT_EQ(hf.info("model.layers.2.eh_proj.weight").shape, (Shape{32, 64}));
  for (const char* t : {"enorm.weight", "hnorm.weight", "shared_head.norm.weight", "self_attn.kv_b_proj.weight",
                        "mlp.gate.e_score_correction_bias", "mlp.experts.7.down_proj.weight"})
    EXPECT_NO_THROW(hf.info(std::string("model.layers.2.") + t)) << t;

  const HfImportSummary imported = import_hf({(dir / "hf").string(), (dir / "back").string(), 0});
  const Checkpoint back(imported.checkpoint);
  EXPECT_EQ(config_from_json(back.state().config).model.mtp_depth, 1);
  EXPECT_EQ(back.state().expert_bias, (std::map<int, std::vector<double>>{{1, std::vector<double>(8, 0.01f)},
                                                                          {2, std::vector<double>(8, 0.02f)}}));
  const SafetensorsFile kiln(original + "/model.safetensors"), read(imported.checkpoint + "/model.safetensors");
  EXPECT_EQ(read.tensors().size(), kiln.tensors().size());
  for (const TensorInfo& t : kiln.tensors()) {
    const auto a = read.data(t.name), b = kiln.data(t.name);
    ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << t.name;
  }

  // The module's copy of the embedding changed: kiln keeps one embedding, so it is refused.
  const fs::path file = dir / "hf" / "model.safetensors";
  {
    std::vector<TensorInfo> infos = hf.tensors();
    SafetensorsWriter writer((dir / "changed.safetensors").string(), infos);
    for (const TensorInfo& t : infos) {
      std::vector<std::byte> bytes(hf.data(t.name).begin(), hf.data(t.name).end());
      if (t.name == "model.layers.2.embed_tokens.weight") bytes[0] ^= std::byte{1};
      writer.write_tensor(bytes.data(), bytes.size());
    }
    writer.close();
  }
  fs::rename(dir / "changed.safetensors", file);
  EXPECT_EQ(error_of([&] { import_hf({(dir / "hf").string(), (dir / "refused").string(), 0}); }),
            "import: model.layers.2.embed_tokens.weight differs from model.embed_tokens.weight; kiln's multi-token "
            "prediction modules share the model's embedding and output layer, so the file's copies must hold the "
            "same values");
  EXPECT_FALSE(fs::exists(dir / "refused"));
}

// A DeepSeek checkpoint's multi-token prediction layer (model.layers.N.*, past num_hidden_layers)
// is skipped with a note; a file that says rope_interleave false is read in kiln's order.
TEST(HfDeepseek, ImportSkipsPredictionLayersAndFollowsRopeInterleave) {
  const ModelConfig m = deepseek_model(true, false);
  const fs::path dir = deepseek_dir("mtp");
  const std::string original = test::save_test_model(m, dir / "original");
  export_hf(original, (dir / "hf").string());
  {
    const fs::path file = dir / "hf" / "model.safetensors";
    const SafetensorsFile exported(file.string());
    std::vector<TensorInfo> infos = exported.tensors();
    infos.push_back({"model.layers.2.eh_proj.weight", DType::F32, {32, 64}});
    infos.push_back({"model.layers.2.self_attn.o_proj.weight", DType::F32, {32, 24}});
    SafetensorsWriter writer((dir / "with_mtp.safetensors").string(), infos);
    for (const TensorInfo& t : exported.tensors()) writer.write_tensor(exported.data(t.name).data(), exported.data(t.name).size());
    const std::vector<float> zeros(32 * 64, 0.0f);
    writer.write_tensor(zeros.data(), 32 * 64 * sizeof(float));
    writer.write_tensor(zeros.data(), 32 * 24 * sizeof(float));
    writer.close();
  }
  fs::rename(dir / "with_mtp.safetensors", dir / "hf" / "model.safetensors");
  const HfImportSummary imported = import_hf({(dir / "hf").string(), (dir / "back").string(), 0});
  EXPECT_EQ(imported.notes, (std::vector<std::string>{
                                (dir / "hf").string() + " has no tokenizer files; data.tokenizer is byte (set another "
                                                        "with --set data.tokenizer=SPEC when resuming)",
                                "skipped the 2 tensors of the multi-token prediction layers past layer 1 "
                                "(model.layers.2. on), which kiln does not import"}));

  // The same file said to hold its rotary rows in kiln's order: read as it stands.
  json config;
  std::ifstream(dir / "hf" / "config.json") >> config;
  config["rope_interleave"] = false;
  std::ofstream(dir / "hf" / "config.json") << config.dump();
  const HfImportSummary plain = import_hf({(dir / "hf").string(), (dir / "plain").string(), 0});
  const SafetensorsFile kiln(original + "/model.safetensors"), read(plain.checkpoint + "/model.safetensors");
  const std::string down = "layers.0.attn.down.weight";
  EXPECT_EQ(row_of(read, down, 16 + 12 + 1), row_of(kiln, down, 16 + 12 + 2));
  EXPECT_EQ(row_of(read, down, 16 + 12 + 2), row_of(kiln, down, 16 + 12 + 1));
  EXPECT_EQ(row_of(read, down, 16 + 3), row_of(kiln, down, 16 + 3));
}

}  // namespace
}  // namespace kiln
