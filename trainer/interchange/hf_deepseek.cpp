#include "trainer/interchange/hf_deepseek.h"

#include <cmath>

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {
namespace {

using nlohmann::json;

// transformers' DeepseekV3RMSNorm default, which its latent norms keep.
constexpr double kLatentNormEps = 1e-6;
// The biased scores a group is scored by (DeepseekV3TopkRouter's topk(2)).
constexpr int kGroupScoreExperts = 2;

[[noreturn]] void refuse_deepseek(const std::string& why) {
  fail("export: DeepseekV3ForCausalLM " + why + "; --format hf cannot express this model");
}

// YaRN's positions as DeepseekV3 reads them: max_position_embeddings is the stretched context.
int64_t yarn_positions(const ModelConfig& m) {
  const double positions = m.rope_scaling_factor * m.rope_original_seq_len;
  if (positions != std::floor(positions))
    refuse_deepseek(fmt::format("reads YaRN's factor as max_position_embeddings / original_max_position_embeddings "
                                "(before transformers 5), and this model's model.rope_scaling_factor={:g} x "
                                "model.rope_original_seq_len={} is no whole number of positions",
                                m.rope_scaling_factor, m.rope_original_seq_len));
  return static_cast<int64_t>(positions);
}

// The first layer with experts (first_k_dense_replace); n_layer when none has any.
int first_expert_layer(const ModelConfig& m) {
  int first = 0;
  while (first < m.n_layer && !m.moe.is_moe_layer(first)) ++first;
  return first;
}

void check_deepseek_export(const ModelConfig& m) {
  if (m.norm_eps != kLatentNormEps)
    refuse_deepseek(fmt::format("normalises the query and key/value latents with eps 1e-6 whatever rms_norm_eps "
                                "says, and this model has model.norm_eps={:g} (its latent norms take it)",
                                m.norm_eps));
  if (m.sliding_window > 0)
    refuse_deepseek(fmt::format("has no attention window, and this model has model.sliding_window={}", m.sliding_window));
  if (m.rope_scaling == "llama3")
    refuse_deepseek("is written with YaRN's rope_scaling or none, and this model has model.rope_scaling=llama3");
  const int first = first_expert_layer(m);
  if (first == m.n_layer) return;
  const MoeConfig& moe = m.moe;
  for (int l = first; l < m.n_layer; ++l)
    if (!moe.is_moe_layer(l))
      refuse_deepseek(fmt::format("has experts in every layer from its first with experts (first_k_dense_replace) on, "
                                  "and this model's layer {} is dense",
                                  l));
  if (moe.score != "sigmoid") refuse_deepseek("scores its router by sigmoid, and this model has moe.score=" + moe.score);
  if (moe.shared_experts == 0)
    refuse_deepseek("has shared experts in every layer with experts, and this model has moe.shared_experts=0");
  if (moe.route_groups > 1 && moe.top_k / moe.route_groups_topk != kGroupScoreExperts)
    refuse_deepseek(fmt::format("scores each group of experts by its best {} biased scores, and this model by its "
                                "best moe.top_k / moe.route_groups_topk = {} / {}",
                                kGroupScoreExperts, moe.top_k, moe.route_groups_topk));
}

json yarn_to_hf(const ModelConfig& m) {
  if (m.rope_scaling != "yarn") return nullptr;
  return {{"rope_type", "yarn"},
          {"factor", m.rope_scaling_factor},
          {"original_max_position_embeddings", m.rope_original_seq_len},
          {"beta_fast", m.rope_beta_fast},
          {"beta_slow", m.rope_beta_slow},
          {"mscale", m.rope_mscale},
          {"mscale_all_dim", m.rope_mscale_all_dim}};
}

// rope_scaling (or transformers 5's rope_parameters, which holds rope_theta too): YaRN's, or
// none ("default"). `positions` is the file's max_position_embeddings.
void yarn_from_hf(const json& scaling, const char* key, const std::string& file, int64_t positions, ModelConfig& m) {
  const HfFields f(scaling, file);
  const std::string type = f.get<std::string>("rope_type", f.get<std::string>("type", "default"));
  m.rope_theta = f.get<double>("rope_theta", m.rope_theta);
  if (type == "default") return;
  if (type != "yarn")
    fail(fmt::format("import: {}: {}'s rope_type \"{}\" is not one kiln computes for DeepseekV3 (yarn)", file, key, type));
  if (f.present("attention_factor"))
    fail(fmt::format("import: {}: {} sets attention_factor; kiln derives YaRN's from mscale and mscale_all_dim", file, key));
  f.require<bool>("truncate", true, true, "kiln rounds YaRN's ramp ends outwards, as transformers' default does");
  m.rope_scaling = "yarn";
  m.rope_original_seq_len = f.get<int>("original_max_position_embeddings", static_cast<int>(positions));
  m.rope_scaling_factor = f.get<double>("factor", static_cast<double>(positions) / m.rope_original_seq_len);
  if (m.rope_scaling_factor * m.rope_original_seq_len != static_cast<double>(positions))
    fail(fmt::format("import: {}: {}'s factor {:g} is not max_position_embeddings / original_max_position_embeddings "
                     "= {} / {}, which transformers before 5 take for it",
                     file, key, m.rope_scaling_factor, positions, m.rope_original_seq_len));
  // transformers' defaults: the betas 32 and 1, the mscales none (kiln's 0).
  m.rope_beta_fast = f.get<double>("beta_fast", 32.0);
  m.rope_beta_slow = f.get<double>("beta_slow", 1.0);
  m.rope_mscale = f.get<double>("mscale", 0.0);
  m.rope_mscale_all_dim = f.get<double>("mscale_all_dim", 0.0);
}

// The experts of a deepseek_v3 file: from layer first_k_dense_replace on, every layer's.
void deepseek_experts_from_hf(const HfFields& f, ModelConfig& m) {
  const std::string& file = f.file();
  const bool routed = !f.config().contains("n_routed_experts") || f.present("n_routed_experts");
  const int dense = f.get<int>("first_k_dense_replace", 3);
  if (!routed || dense >= m.n_layer) return;  // a dense model
  MoeConfig& moe = m.moe;
  moe.num_experts = f.get<int>("n_routed_experts", 256);
  moe.top_k = f.get<int>("num_experts_per_tok", 8);
  moe.ffn_hidden = f.get<int>("moe_intermediate_size", 2048);
  moe.shared_experts = f.get<int>("n_shared_experts", 1);
  moe.score = "sigmoid";
  moe.normalize_top_k = f.get<bool>("norm_topk_prob", true);
  moe.gate_scale = f.get<double>("routed_scaling_factor", 2.5);
  moe.route_groups = f.get<int>("n_group", 8);
  moe.route_groups_topk = f.get<int>("topk_group", 4);
  moe.dense_layers = dense;
  // DeepSeek's own config.json says these; transformers' class reads neither and computes
  // what these values say.
  f.require<int>("moe_layer_freq", 1, 1, "transformers' DeepseekV3 puts experts in every layer from first_k_dense_replace on");
  f.require<std::string>("scoring_func", "sigmoid", "sigmoid", "transformers' DeepseekV3 scores its router by sigmoid");
  if (moe.route_groups > 1 && moe.route_groups_topk > 0 && moe.top_k / moe.route_groups_topk != kGroupScoreExperts)
    fail(fmt::format("import: {}: num_experts_per_tok {} over topk_group {}: transformers' DeepseekV3 scores each "
                     "group by its best {} experts, kiln by its best num_experts_per_tok / topk_group",
                     file, moe.top_k, moe.route_groups_topk, kGroupScoreExperts));
}

}  // namespace

bool exports_as_deepseek_v3(const ModelConfig& m) { return m.latent_attention(); }

json deepseek_v3_config(const ModelConfig& m) {
  check_deepseek_export(m);
  const bool yarn = m.rope_scaling == "yarn";
  json c = {{"architectures", {"DeepseekV3ForCausalLM"}},
            {"model_type", "deepseek_v3"},
            {"vocab_size", m.vocab_size},
            {"hidden_size", m.d_model},
            {"intermediate_size", m.ffn_dim()},  // the dense layers'
            {"num_hidden_layers", m.n_layer},
            {"num_attention_heads", m.n_head},
            {"num_key_value_heads", m.n_head},
            {"q_lora_rank", m.q_lora_rank > 0 ? json(m.q_lora_rank) : json(nullptr)},
            {"kv_lora_rank", m.kv_lora_rank},
            {"qk_nope_head_dim", m.qk_nope_head_dim},
            {"qk_rope_head_dim", m.qk_rope_head_dim},
            {"v_head_dim", m.v_head_dim},
            {"max_position_embeddings", yarn ? yarn_positions(m) : m.seq_len},
            {"rms_norm_eps", m.norm_eps},
            {"rope_theta", m.rope_theta},
            {"rope_scaling", yarn_to_hf(m)},
            // The rotary rows are written interleaved (hf_tensors.h), as DeepSeek's own
            // checkpoints have them: a reader written for those takes ours alike.
            {"rope_interleave", true},
            {"hidden_act", "silu"},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            // DeepSeek's config.json field (transformers' class reads none): its checkpoints'
            // multi-token prediction layers past num_hidden_layers.
            {"num_nextn_predict_layers", m.mtp_depth}};
  const MoeConfig& moe = m.moe;
  const int first = first_expert_layer(m);
  if (first == m.n_layer) {  // no layer has experts: the routed experts' fields are null
    for (const char* key : {"n_routed_experts", "num_experts_per_tok", "n_shared_experts", "moe_intermediate_size",
                            "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob"})
      c[key] = nullptr;
    c["first_k_dense_replace"] = m.n_layer;
    return c;
  }
  c.update({{"n_routed_experts", moe.num_experts},
            {"num_experts_per_tok", moe.top_k},
            {"n_shared_experts", moe.shared_experts},
            {"moe_intermediate_size", m.expert_ffn_dim()},
            {"routed_scaling_factor", moe.gate_scale},
            {"n_group", moe.route_groups},
            {"topk_group", moe.route_groups_topk},
            {"norm_topk_prob", moe.normalize_top_k},
            {"first_k_dense_replace", first}});
  return c;
}

ModelConfig deepseek_v3_from_hf(const HfFields& f) {
  const std::string& file = f.file();
  ModelConfig m;
  m.arch = "llama";
  m.attention = "mla";
  // DeepseekV3Config's defaults are DeepSeek-V3's.
  m.vocab_size = f.get<int>("vocab_size", 129280);
  m.d_model = f.get<int>("hidden_size", 7168);
  m.d_ff = f.get<int>("intermediate_size", 18432);
  m.n_layer = f.get<int>("num_hidden_layers", 61);
  m.n_head = f.get<int>("num_attention_heads", 128);
  // null is no query latent; absent, DeepSeek-V3's.
  m.q_lora_rank = f.config().contains("q_lora_rank") ? f.get<int>("q_lora_rank", 0) : 1536;
  m.kv_lora_rank = f.get<int>("kv_lora_rank", 512);
  m.qk_nope_head_dim = f.get<int>("qk_nope_head_dim", 128);
  m.qk_rope_head_dim = f.get<int>("qk_rope_head_dim", 64);
  m.v_head_dim = f.get<int>("v_head_dim", 128);
  m.seq_len = f.get<int>("max_position_embeddings", 4096);
  m.norm_eps = f.get<double>("rms_norm_eps", 1e-6);
  m.rope_theta = f.get<double>("rope_theta", 10000.0);
  m.init_std = f.get<double>("initializer_range", 0.02);
  m.tie_embeddings = f.get<bool>("tie_word_embeddings", false);
  if (f.present("quantization_config"))
    fail("import: " + file + " has a quantization_config: kiln imports floating-point weights (dequantize the "
         "checkpoint to bf16 first)");
  f.require<int>("num_key_value_heads", m.n_head, m.n_head,
                 "latent attention has a key and value head for every query head (num_attention_heads)");
  f.require<std::string>("hidden_act", "silu", "silu", "kiln's SwiGLU gates with silu");
  f.require<bool>("attention_bias", false, false, "kiln's latent attention has no biases");
  f.require<double>("rms_norm_eps", kLatentNormEps, kLatentNormEps,
                    "transformers' DeepseekV3 normalises the latents with 1e-6 whatever it says, kiln with it");
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (f.present(key)) yarn_from_hf(f.object(key), key, file, m.seq_len, m);
  f.get<bool>("rope_interleave", true);  // of the right kind; the tensor map follows it
  m.mtp_depth = f.get<int>("num_nextn_predict_layers", 0);
  deepseek_experts_from_hf(f, m);
  return m;
}

bool deepseek_v3_rope_interleaved(const json& config) {
  // deepseek_v3_from_hf refuses one that is not a boolean.
  const auto it = config.find("rope_interleave");
  return it == config.end() || !it->is_boolean() || it->get<bool>();
}

}  // namespace kiln
