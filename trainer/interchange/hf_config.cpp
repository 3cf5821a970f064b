#include "trainer/interchange/hf_config.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/check.h"
#include "trainer/interchange/hf_deepseek.h"
#include "trainer/interchange/hf_fields.h"

namespace kiln {
namespace {

using nlohmann::json;

const char* torch_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    case DType::I32:
    case DType::I64:
    case DType::E4M3:
    case DType::E5M2: break;
  }
  fail(std::string("export: weights of dtype ") + dtype_name(dtype) + " are not a model's");
}

ModelConfig gpt2_from_hf(const HfFields& f, const std::string& file) {
  ModelConfig m;
  m.arch = "gpt2";
  // GPT2Config's defaults are GPT-2 small's.
  m.vocab_size = f.get<int>("vocab_size", 50257);
  m.seq_len = f.get<int>("n_positions", 1024);
  m.d_model = f.get<int>("n_embd", 768);
  m.n_layer = f.get<int>("n_layer", 12);
  m.n_head = f.get<int>("n_head", 12);
  m.d_ff = f.get<int>("n_inner", 0);  // absent: 4 * n_embd, as kiln's 0 means
  m.norm_eps = f.get<double>("layer_norm_epsilon", 1e-5);
  m.init_std = f.get<double>("initializer_range", 0.02);
  m.tie_embeddings = f.get<bool>("tie_word_embeddings", true);
  const std::string act = f.get<std::string>("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    fail(
        fmt::format("import: {}: activation_function \"{}\" is not the tanh GELU (gelu_new) kiln "
                    "computes",
                    file, act));
  f.require<bool>("scale_attn_weights", true, true,
                  "kiln scales attention scores by 1/sqrt(head dim)");
  f.require<bool>("scale_attn_by_inverse_layer_idx", false, false,
                  "kiln does not scale attention by layer");
  f.require<bool>("add_cross_attention", false, false, "kiln models have no cross-attention");
  return m;
}

// Llama 3.1's rope_scaling (rope_type "llama3"); any other kind is refused, named. `key` is
// the field that holds it: rope_scaling, or transformers 5's rope_parameters, where the
// unscaled kind is "default" and rope_theta lives too.
void rope_scaling_from_hf(const json& scaling, const char* key, const std::string& file, ModelConfig& m) {
  const HfFields f(scaling, file);
  const std::string type = f.get<std::string>("rope_type", f.get<std::string>("type", ""));
  m.rope_theta = f.get<double>("rope_theta", m.rope_theta);
  if (type == "default" && std::string(key) == "rope_parameters") return;
  if (type != "llama3")
    fail(fmt::format("import: {}: {}'s rope_type \"{}\" is not one kiln computes (llama3)", file, key, type));
  m.rope_scaling = "llama3";
  m.rope_scaling_factor = f.get<double>("factor", m.rope_scaling_factor);
  m.rope_low_freq_factor = f.get<double>("low_freq_factor", m.rope_low_freq_factor);
  m.rope_high_freq_factor = f.get<double>("high_freq_factor", m.rope_high_freq_factor);
  m.rope_original_seq_len = f.get<int>("original_max_position_embeddings", m.rope_original_seq_len);
}

ModelConfig llama_from_hf(const HfFields& f, const std::string& file) {
  ModelConfig m;
  m.arch = "llama";
  // LlamaConfig's defaults are Llama 2 7B's.
  m.vocab_size = f.get<int>("vocab_size", 32000);
  m.d_model = f.get<int>("hidden_size", 4096);
  m.d_ff = f.get<int>("intermediate_size", 11008);
  m.n_layer = f.get<int>("num_hidden_layers", 32);
  m.n_head = f.get<int>("num_attention_heads", 32);
  m.n_kv_head = f.get<int>("num_key_value_heads", m.n_head);
  m.seq_len = f.get<int>("max_position_embeddings", 2048);
  m.norm_eps = f.get<double>("rms_norm_eps", 1e-6);
  m.rope_theta = f.get<double>("rope_theta", 10000.0);
  m.init_std = f.get<double>("initializer_range", 0.02);
  m.tie_embeddings = f.get<bool>("tie_word_embeddings", false);
  f.require<std::string>("hidden_act", "silu", "silu", "kiln's SwiGLU gates with silu");
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (f.present(key)) rope_scaling_from_hf(f.object(key), key, file, m);
  f.require<bool>("attention_bias", false, false, "kiln's Llama layers have no biases");
  f.require<bool>("mlp_bias", false, false, "kiln's Llama layers have no biases");
  // A head_dim other than hidden_size / num_attention_heads is kept; the same one is implied.
  if (m.n_head > 0 && f.get<int>("head_dim", m.d_model / m.n_head) != m.d_model / m.n_head)
    m.explicit_head_dim = f.get<int>("head_dim", 0);
  return m;
}

// Mistral is Llama with (optionally) a sliding window, kept in model.sliding_window (the
// import refuses one below the context it trains at); its config's defaults are Mistral 7B's,
// whose window is 4096 when the file is silent (null: none).
ModelConfig mistral_from_hf(const HfFields& f, const std::string& file) {
  ModelConfig m = llama_from_hf(f, file);
  m.family = "mistral";
  if (!f.present("intermediate_size")) m.d_ff = 14336;
  if (!f.present("num_key_value_heads")) m.n_kv_head = 8;
  if (!f.present("max_position_embeddings")) m.seq_len = 4096 * 32;
  m.sliding_window = f.config().contains("sliding_window") ? f.get<int>("sliding_window", 0) : 4096;
  return m;
}

// Mixtral is Mistral with every MLP a sparse mixture of SwiGLU experts; MixtralConfig's
// defaults are Mixtral 8x7B's (Mistral 7B's, but for these two).
ModelConfig mixtral_from_hf(const HfFields& f, const std::string& file) {
  ModelConfig m = mistral_from_hf(f, file);
  m.family.clear();  // its experts name it
  m.sliding_window = f.get<int>("sliding_window", 0);  // MixtralConfig's: none
  if (!f.present("rms_norm_eps")) m.norm_eps = 1e-5;
  if (!f.present("rope_theta")) m.rope_theta = 1e6;
  m.moe.num_experts = f.get<int>("num_local_experts", 8);
  m.moe.top_k = f.get<int>("num_experts_per_tok", 2);
  m.moe.ffn_hidden = m.d_ff;
  m.moe.aux_loss_coeff = f.get<double>("router_aux_loss_coef", 0.001);
  return m;
}

// Qwen2's and Qwen3's window settings: none may leave a layer attending to less than the
// whole sequence.
void refuse_windowed_layers(const HfFields& f, const std::string& file) {
  if (f.get<bool>("use_sliding_window", false))
    fail("import: " + file + ": use_sliding_window is true; kiln's attention sees the whole sequence");
  if (!f.present("layer_types")) return;
  const json& types = f.array("layer_types");
  for (const json& type : types)
    if (type != "full_attention")
      fail(fmt::format("import: {}: layer_types has {}; kiln's layers all attend to the whole sequence "
                       "(full_attention)",
                       file, type.dump()));
}

// What Qwen2 and Qwen3 share: the Llama layer, the defaults Qwen2Config has (Qwen2-7B's, which
// Qwen3Config keeps) and windows that must all be the whole sequence.
ModelConfig qwen_from_hf(const HfFields& f, const std::string& file) {
  ModelConfig m = llama_from_hf(f, file);
  if (!f.present("vocab_size")) m.vocab_size = 151936;
  if (!f.present("intermediate_size")) m.d_ff = 22016;
  if (!f.present("max_position_embeddings")) m.seq_len = 32768;
  refuse_windowed_layers(f, file);
  return m;
}

// Qwen2 is Llama with biases on the query, key and value projections.
ModelConfig qwen2_from_hf(const HfFields& f, const std::string& file) {
  ModelConfig m = qwen_from_hf(f, file);
  m.attention_bias = true;
  return m;
}

// Qwen3 is Llama with each query and key head normalised (q_norm, k_norm) and a head_dim of
// its own (Qwen3Config's 128 where the file is silent); its attention_bias (on o_proj too) is
// refused as Llama's.
ModelConfig qwen3_from_hf(const HfFields& f, const std::string& file) {
  ModelConfig m = qwen_from_hf(f, file);
  m.qk_norm = true;
  if (!f.present("head_dim")) m.explicit_head_dim = 128;
  if (m.explicit_head_dim == m.d_model / std::max(m.n_head, 1)) m.explicit_head_dim = 0;
  return m;
}

// Qwen3-MoE is Qwen3 with a sparse mixture of SwiGLU experts in the layers decoder_sparse_step
// and mlp_only_layers choose (HF: layer i when (i + 1) % step == 0 and i is not listed), its
// router's softmax top-k divided by their sum only with norm_topk_prob; Qwen3MoeConfig's
// defaults are Qwen3-30B-A3B's.
ModelConfig qwen3_moe_from_hf(const HfFields& f, const std::string& file) {
  ModelConfig m = qwen3_from_hf(f, file);
  if (!f.present("intermediate_size")) m.d_ff = 6144;
  MoeConfig& moe = m.moe;
  moe.num_experts = f.get<int>("num_experts", 128);
  moe.top_k = f.get<int>("num_experts_per_tok", 8);
  moe.ffn_hidden = f.get<int>("moe_intermediate_size", 768);
  moe.normalize_top_k = f.get<bool>("norm_topk_prob", false);
  moe.aux_loss_coeff = f.get<double>("router_aux_loss_coef", 0.001);
  const int step = f.get<int>("decoder_sparse_step", 1);
  if (step < 1) fail(fmt::format("import: {}: decoder_sparse_step is {}, not a step of layers", file, step));
  std::vector<bool> sparse(static_cast<size_t>(m.n_layer));
  for (int l = 0; l < m.n_layer; ++l) sparse[static_cast<size_t>(l)] = (l + 1) % step == 0;
  if (f.present("mlp_only_layers"))
    for (const json& layer : f.array("mlp_only_layers")) {
      if (!layer.is_number_integer() || layer.get<int>() < 0 || layer.get<int>() >= m.n_layer)
        fail(fmt::format("import: {}: mlp_only_layers has {}, not a layer of the {}", file, layer.dump(), m.n_layer));
      sparse[layer.get<size_t>()] = false;
    }
  // The first dense layers as moe.dense_layers where that is all there is, else a list.
  const auto first_sparse = std::find(sparse.begin(), sparse.end(), true);
  if (first_sparse == sparse.end()) fail("import: " + file + ": no layer has experts (decoder_sparse_step, mlp_only_layers)");
  if (std::find(first_sparse, sparse.end(), false) == sparse.end()) {
    moe.dense_layers = static_cast<int>(first_sparse - sparse.begin());
  } else {
    for (int l = 0; l < m.n_layer; ++l)
      if (sparse[static_cast<size_t>(l)]) moe.layers += (moe.layers.empty() ? "" : ",") + std::to_string(l);
  }
  return m;
}

// Refuses, in one line, an MoE model the class it exports as computes differently.
void check_moe_export(const ModelConfig& m) {
  const MoeConfig& moe = m.moe;
  const bool qwen3 = exports_as_qwen3_moe(m);
  const auto refuse = [qwen3](const std::string& why) {
    fail(fmt::format("export: {} {}; --format hf cannot express this model",
                     qwen3 ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM", why));
  };
  if (!m.is_llama()) refuse("has Llama-style layers with SwiGLU experts, and this model is model.arch=gpt2");
  if (!qwen3)
    for (int l = 0; l < m.n_layer; ++l)
      if (!moe.is_moe_layer(l))
        refuse(fmt::format("has experts in every layer, and this model's layer {} is dense", l));
  if (moe.shared_experts > 0)
    refuse(fmt::format("has no shared experts, and this model has moe.shared_experts={}", moe.shared_experts));
  if (m.attention_bias)
    refuse(qwen3 ? "puts its attention biases on o_proj too, and this model has model.attention_bias=true "
                   "(query, key and value biases only)"
                 : "has no attention biases, and this model has model.attention_bias=true");
  if (moe.score != "softmax") refuse("scores its router by softmax, and this model has moe.score=" + moe.score);
  if (!qwen3 && !moe.normalize_top_k)
    refuse("divides the top-k gates by their sum, and this model has moe.normalize_top_k=false");
  if (moe.gate_scale != 1.0)
    refuse(fmt::format("does not scale its gates, and this model has moe.gate_scale={:g}", moe.gate_scale));
  if (moe.route_groups_topk < moe.route_groups)
    refuse(fmt::format("routes each token over every expert, and this model over {} of its moe.route_groups={}",
                       moe.route_groups_topk, moe.route_groups));
}

// Mistral's and Mixtral's sliding_window: null for none.
json window_to_hf(const ModelConfig& m) { return m.sliding_window > 0 ? json(m.sliding_window) : json(nullptr); }

// The class and fields of a dense Llama-style model: Qwen3's with normalised heads, Mistral's
// when its family says so, Qwen2's with query, key and value biases, else Llama's.
json dense_llama_family(const ModelConfig& m) {
  if (m.qk_norm) {
    if (m.attention_bias)
      fail("export: Qwen3ForCausalLM's attention_bias puts a bias on o_proj too, and this model has "
           "model.attention_bias=true with model.qk_norm=true (query, key and value biases only); "
           "--format hf cannot express this model");
    return {{"architectures", {"Qwen3ForCausalLM"}},
            {"model_type", "qwen3"},
            {"attention_bias", false},
            {"use_sliding_window", false},
            {"sliding_window", nullptr},
            {"max_window_layers", m.n_layer}};
  }
  if (m.family == "mistral")
    return {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"sliding_window", window_to_hf(m)}};
  if (m.attention_bias)
    return {{"architectures", {"Qwen2ForCausalLM"}},
            {"model_type", "qwen2"},
            {"use_sliding_window", false},
            {"sliding_window", nullptr}};
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"pretraining_tp", 1}};
}

// Qwen3MoeConfig's fields: Qwen3's, the experts, and the dense layers as mlp_only_layers.
json qwen3_moe_fields(const ModelConfig& m) {
  json dense = json::array();
  for (int l = 0; l < m.n_layer; ++l)
    if (!m.moe.is_moe_layer(l)) dense.push_back(l);
  json c = dense_llama_family(m);  // Qwen3's, the heads being normalised
  c.update({{"architectures", {"Qwen3MoeForCausalLM"}},
            {"model_type", "qwen3_moe"},
            {"num_experts", m.moe.num_experts},
            {"num_experts_per_tok", m.moe.top_k},
            {"moe_intermediate_size", m.expert_ffn_dim()},
            {"norm_topk_prob", m.moe.normalize_top_k},
            {"decoder_sparse_step", 1},
            {"mlp_only_layers", dense},
            {"router_aux_loss_coef", m.moe.aux_loss_coeff},
            {"output_router_logits", false}});
  return c;
}

json rope_scaling_to_hf(const ModelConfig& m) {
  if (m.rope_scaling != "llama3") return nullptr;
  return {{"rope_type", "llama3"},
          {"factor", m.rope_scaling_factor},
          {"low_freq_factor", m.rope_low_freq_factor},
          {"high_freq_factor", m.rope_high_freq_factor},
          {"original_max_position_embeddings", m.rope_original_seq_len}};
}

}  // namespace

bool exports_as_qwen3_moe(const ModelConfig& m) { return m.moe.enabled() && m.qk_norm; }

json hf_config(const ModelConfig& m, DType dtype, int32_t eod) {
  json c;
  if (m.rope_scaling == "yarn" && !exports_as_deepseek_v3(m))
    fail("export: model.rope_scaling=yarn is written only for DeepseekV3ForCausalLM (model.attention=mla); kiln "
         "writes llama3's for the other classes");
  if (m.moe.enabled() && !exports_as_deepseek_v3(m)) check_moe_export(m);
  if (exports_as_deepseek_v3(m)) {
    c = deepseek_v3_config(m);
  } else if (m.is_llama()) {
    // LlamaConfig's fields, which MixtralConfig shares (its intermediate_size each expert's),
    // and Qwen3MoeConfig (its intermediate_size the dense layers').
    const bool mixtral = m.moe.enabled() && !exports_as_qwen3_moe(m);
    c = {{"vocab_size", m.vocab_size},
         {"hidden_size", m.d_model},
         {"intermediate_size", mixtral ? m.expert_ffn_dim() : m.ffn_dim()},
         {"num_hidden_layers", m.n_layer},
         {"num_attention_heads", m.n_head},
         {"num_key_value_heads", m.kv_heads()},
         {"head_dim", m.head_dim()},
         {"max_position_embeddings", m.seq_len},
         {"rms_norm_eps", m.norm_eps},
         {"rope_theta", m.rope_theta},
         {"rope_scaling", rope_scaling_to_hf(m)},
         {"hidden_act", "silu"},
         {"attention_dropout", 0.0}};
    const json own = !m.moe.enabled()      ? dense_llama_family(m)
                     : !mixtral             ? qwen3_moe_fields(m)
                                            : json{{"architectures", {"MixtralForCausalLM"}},
                                {"model_type", "mixtral"},
                                {"sliding_window", window_to_hf(m)},
                                {"num_local_experts", m.moe.num_experts},
                                {"num_experts_per_tok", m.moe.top_k},
                                {"router_aux_loss_coef", m.moe.aux_loss_coeff},
                                {"router_jitter_noise", 0.0},
                                {"output_router_logits", false}};
    c.update(own);
  } else {
    if (m.explicit_head_dim > 0 && m.explicit_head_dim * m.n_head != m.d_model)
      fail(fmt::format("export: GPT2LMHeadModel's heads are n_embd / n_head wide, and this gpt2 model has "
                       "model.head_dim={} for model.d_model={} and model.n_head={}",
                       m.explicit_head_dim, m.d_model, m.n_head));
    if (m.kv_heads() != m.n_head)
      fail(
          fmt::format("export: GPT2LMHeadModel has no grouped-query attention, and this gpt2 model "
                      "has model.n_kv_head={} for model.n_head={}",
                      m.kv_heads(), m.n_head));
    c = {{"architectures", {"GPT2LMHeadModel"}},
         {"model_type", "gpt2"},
         {"vocab_size", m.vocab_size},
         {"n_positions", m.seq_len},
         {"n_ctx", m.seq_len},
         {"n_embd", m.d_model},
         {"n_layer", m.n_layer},
         {"n_head", m.n_head},
         // null: 4 * n_embd, which is what kiln's d_ff = 0 means too.
         {"n_inner", m.d_ff > 0 ? json(m.d_ff) : json(nullptr)},
         {"activation_function", "gelu_new"},
         {"layer_norm_epsilon", m.norm_eps},
         // kiln trains without dropout; fine-tuning elsewhere starts the same way.
         {"resid_pdrop", 0.0},
         {"embd_pdrop", 0.0},
         {"attn_pdrop", 0.0},
         {"scale_attn_weights", true}};
  }
  c["initializer_range"] = m.init_std;
  c["tie_word_embeddings"] = m.tie_embeddings;
  c["use_cache"] = true;
  c["torch_dtype"] = torch_dtype(dtype);
  if (eod >= 0) {
    c["bos_token_id"] = eod;
    c["eos_token_id"] = eod;
  }
  return c;
}

ModelConfig model_from_hf_config(const json& config, const std::string& file) {
  if (!config.is_object()) fail("import: " + file + " is not a JSON object");
  const HfFields fields(config, file);
  if (!fields.present("model_type")) fail("import: " + file + " has no model_type");
  const std::string type = fields.get<std::string>("model_type", "");
  if (type == "gpt2") return gpt2_from_hf(fields, file);
  if (type == "llama") return llama_from_hf(fields, file);
  if (type == "mixtral") return mixtral_from_hf(fields, file);
  if (type == "qwen2") return qwen2_from_hf(fields, file);
  if (type == "qwen3") return qwen3_from_hf(fields, file);
  if (type == "qwen3_moe") return qwen3_moe_from_hf(fields, file);
  if (type == "mistral") return mistral_from_hf(fields, file);
  if (type == "deepseek_v3") return deepseek_v3_from_hf(fields);
  fail("import: " + file + ": model_type \"" + type +
       "\" is not one kiln imports (deepseek_v3, gpt2, llama, mistral, mixtral, qwen2, qwen3, qwen3_moe)");
}

}  // namespace kiln
