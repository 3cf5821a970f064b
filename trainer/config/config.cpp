#include "trainer/config/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>

#include "base/check.h"
#include "base/closest_word.h"
#include "base/trim.h"
#include "trainer/config/embedded_config.h"
#include "trainer/config/lora_targets.h"
#include "trainer/config/pipeline_layers.h"
#include "store/types.h"

namespace kiln {
namespace {

using nlohmann::json;

// Every key, in the order the docs list them. The reader, the writer and the override
// parser all walk this one list, so adding a field here is the whole job.
template <class C, class F>
void for_each_field(C& c, F&& f) {
  f("model", "arch", c.model.arch);
  f("model", "n_layer", c.model.n_layer);
  f("model", "n_head", c.model.n_head);
  f("model", "n_kv_head", c.model.n_kv_head);
  f("model", "d_model", c.model.d_model);
  f("model", "d_ff", c.model.d_ff);
  f("model", "head_dim", c.model.explicit_head_dim);
  f("model", "vocab_size", c.model.vocab_size);
  f("model", "seq_len", c.model.seq_len);
  f("model", "rope_theta", c.model.rope_theta);
  f("model", "rope_scaling", c.model.rope_scaling);
  f("model", "rope_scaling_factor", c.model.rope_scaling_factor);
  f("model", "rope_low_freq_factor", c.model.rope_low_freq_factor);
  f("model", "rope_high_freq_factor", c.model.rope_high_freq_factor);
  f("model", "rope_original_seq_len", c.model.rope_original_seq_len);
  f("model", "rope_beta_fast", c.model.rope_beta_fast);
  f("model", "rope_beta_slow", c.model.rope_beta_slow);
  f("model", "rope_mscale", c.model.rope_mscale);
  f("model", "rope_mscale_all_dim", c.model.rope_mscale_all_dim);
  f("model", "tie_embeddings", c.model.tie_embeddings);
  f("model", "attention_bias", c.model.attention_bias);
  f("model", "qk_norm", c.model.qk_norm);
  f("model", "attention", c.model.attention);
  f("model", "q_lora_rank", c.model.q_lora_rank);
  f("model", "kv_lora_rank", c.model.kv_lora_rank);
  f("model", "qk_nope_head_dim", c.model.qk_nope_head_dim);
  f("model", "qk_rope_head_dim", c.model.qk_rope_head_dim);
  f("model", "v_head_dim", c.model.v_head_dim);
  f("model", "mtp_depth", c.model.mtp_depth);
  f("model", "mtp_loss_weight", c.model.mtp_loss_weight);
  f("model", "family", c.model.family);
  f("model", "sliding_window", c.model.sliding_window);
  f("model", "make_vocab_size_divisible_by", c.model.make_vocab_size_divisible_by);
  f("model", "norm_eps", c.model.norm_eps);
  f("model", "init_std", c.model.init_std);

  f("moe", "num_experts", c.model.moe.num_experts);
  f("moe", "top_k", c.model.moe.top_k);
  f("moe", "ffn_hidden", c.model.moe.ffn_hidden);
  f("moe", "shared_experts", c.model.moe.shared_experts);
  f("moe", "layer_freq", c.model.moe.layer_freq);
  f("moe", "layers", c.model.moe.layers);
  f("moe", "score", c.model.moe.score);
  f("moe", "normalize_top_k", c.model.moe.normalize_top_k);
  f("moe", "gate_scale", c.model.moe.gate_scale);
  f("moe", "aux_loss_coeff", c.model.moe.aux_loss_coeff);
  f("moe", "z_loss_coeff", c.model.moe.z_loss_coeff);
  f("moe", "bias_update_rate", c.model.moe.bias_update_rate);
  f("moe", "capacity_factor", c.model.moe.capacity_factor);
  f("moe", "drop_policy", c.model.moe.drop_policy);
  f("moe", "pad_to_capacity", c.model.moe.pad_to_capacity);
  f("moe", "route_groups", c.model.moe.route_groups);
  f("moe", "route_groups_topk", c.model.moe.route_groups_topk);
  f("moe", "dense_layers", c.model.moe.dense_layers);

  // A key with a dot names an object within its section: finetune.lora.rank is
  // {"finetune": {"lora": {"rank": ...}}}.
  f("finetune", "lora.rank", c.model.lora.rank);
  f("finetune", "lora.alpha", c.model.lora.alpha);
  f("finetune", "lora.dropout", c.model.lora.dropout);
  f("finetune", "lora.targets", c.model.lora.targets);

  f("train", "steps", c.train.steps);
  f("train", "global_batch", c.train.global_batch);
  f("train", "micro_batch", c.train.micro_batch);
  f("train", "lr", c.train.lr);
  f("train", "min_lr", c.train.min_lr);
  f("train", "warmup", c.train.warmup);
  f("train", "decay", c.train.decay);
  f("train", "wsd_decay_fraction", c.train.wsd_decay_fraction);
  f("train", "weight_decay", c.train.weight_decay);
  f("train", "beta1", c.train.beta1);
  f("train", "beta2", c.train.beta2);
  f("train", "adam_eps", c.train.adam_eps);
  f("train", "clip_grad", c.train.clip_grad);
  f("train", "recompute", c.train.recompute);
  f("train", "cuda_graphs", c.train.cuda_graphs);
  f("train", "seed", c.train.seed);
  f("train", "log_interval", c.train.log_interval);
  f("train", "eval_interval", c.train.eval_interval);
  f("train", "eval_iters", c.train.eval_iters);
  f("train", "checkpoint_interval", c.train.checkpoint_interval);
  f("train", "checkpoint_dir", c.train.checkpoint_dir);
  f("train", "checkpoint_keep", c.train.checkpoint_keep);
  f("train", "checkpoint_failures", c.train.checkpoint_failures);
  f("train", "async_checkpoint", c.train.async_checkpoint);
  f("train", "sample_tokens", c.train.sample_tokens);
  f("train", "sample_prompt", c.train.sample_prompt);
  f("train", "sample_temperature", c.train.sample_temperature);

  f("data", "paths", c.data.paths);
  f("data", "split", c.data.split);
  f("data", "tokenizer", c.data.tokenizer);
  f("data", "cache_dir", c.data.cache_dir);
  f("data", "eod_mask_loss", c.data.eod_mask_loss);
  f("data", "reset_position_ids", c.data.reset_position_ids);
  f("data", "reset_attention_mask", c.data.reset_attention_mask);
  f("data", "samples", c.data.samples);

  f("parallel", "tp", c.parallel.tp);
  f("parallel", "pp", c.parallel.pp);
  f("parallel", "vpp", c.parallel.vpp);
  f("parallel", "schedule", c.parallel.schedule);
  f("parallel", "first_stage_layers", c.parallel.first_stage_layers);
  f("parallel", "last_stage_layers", c.parallel.last_stage_layers);
  f("parallel", "sequence_parallel", c.parallel.sequence_parallel);
  f("parallel", "cp", c.parallel.cp);
  f("parallel", "ep", c.parallel.ep);
  f("parallel", "etp", c.parallel.etp);
  f("parallel", "shard", c.parallel.shard);
  f("parallel", "shard_prefetch", c.parallel.shard_prefetch);
  f("parallel", "shard_per_step", c.parallel.shard_per_step);
  f("parallel", "shard_group", c.parallel.shard_group);
  f("parallel", "distributed_optimizer", c.parallel.distributed_optimizer);
  f("parallel", "ddp_bucket_size", c.parallel.ddp_bucket_size);
  f("parallel", "timeout_s", c.parallel.timeout_s);
  f("parallel", "device_comm", c.parallel.device_comm);

  f("precision", "dtype", c.precision.dtype);
  f("precision", "fp8_scaling", c.precision.fp8_scaling);
  f("precision", "fp8_amax_history", c.precision.fp8_amax_history);
  f("precision", "fp8_margin", c.precision.fp8_margin);

  f("backend", "device", c.backend.device);
  f("backend", "threads", c.backend.threads);
  f("backend", "attention", c.backend.attention);
  f("backend", "tune_products", c.backend.tune_products);

  f("store", "path", c.store.path);

  f("alerts", "enabled", c.alerts.enabled);
  f("alerts", "window", c.alerts.window);
  f("alerts", "min_samples", c.alerts.min_samples);
  f("alerts", "loss_zscore", c.alerts.loss_zscore);
  f("alerts", "grad_zscore", c.alerts.grad_zscore);
  f("alerts", "throughput_fraction", c.alerts.throughput_fraction);
  f("alerts", "throughput_steps", c.alerts.throughput_steps);
  f("alerts", "straggler_fraction", c.alerts.straggler_fraction);
  f("alerts", "straggler_steps", c.alerts.straggler_steps);
  f("alerts", "stall_s", c.alerts.stall_s);
  f("alerts", "memory_fraction", c.alerts.memory_fraction);
  f("alerts", "command", c.alerts.command);
  f("alerts", "command_timeout_s", c.alerts.command_timeout_s);
  f("alerts", "actions", c.alerts.actions);
  f("alerts", "rewind_skip", c.alerts.rewind_skip);
  f("alerts", "max_rewinds", c.alerts.max_rewinds);
}

const std::vector<std::string> kSections = {"model",    "moe",       "finetune", "train", "data",
                                            "parallel", "precision", "backend",  "store", "alerts"};
const std::vector<std::string> kRequired = {"n_layer", "n_head", "d_model", "vocab_size",
                                            "seq_len"};  // all in model
constexpr int kByteVocab = 257;  // 256 byte values + end-of-document

enum class Kind { Integer, Number, Bool, String, StringList, Prompts };

template <class T>
constexpr Kind kind_of() {
  if constexpr (std::is_same_v<T, bool>) return Kind::Bool;
  else if constexpr (std::is_integral_v<T>) return Kind::Integer;
  else if constexpr (std::is_floating_point_v<T>) return Kind::Number;
  else if constexpr (std::is_same_v<T, std::string>) return Kind::String;
  else if constexpr (std::is_same_v<T, SamplePrompts>) return Kind::Prompts;
  else {
    static_assert(std::is_same_v<T, std::vector<std::string>>);
    return Kind::StringList;
  }
}

struct Field {
  std::string section, key;
  Kind kind;
};

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> out;
    Config defaults;
    for_each_field(defaults, [&](const char* section, const char* key, const auto& value) {
      out.push_back({section, key, kind_of<std::decay_t<decltype(value)>>()});
    });
    return out;
  }();
  return fields;
}

const Field* find_field(std::string_view section, std::string_view key) {
  for (const Field& f : schema())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

// The value of section.key in j, or null: a dot in the key descends into an object.
const json* key_value(const json& j, const std::string& section, std::string_view key) {
  const auto s = j.find(section);
  if (s == j.end()) return nullptr;
  const json* at = &*s;
  for (;;) {
    const size_t dot = key.find('.');
    if (!at->is_object()) return nullptr;
    const auto found = at->find(std::string(key.substr(0, dot)));
    if (found == at->end()) return nullptr;
    at = &*found;
    if (dot == key.npos) return at;
    key.remove_prefix(dot + 1);
  }
}

bool has_key(const json& j, const char* section, const char* key) { return key_value(j, section, key); }

// The place of section.key in j, made (with the objects above it) when absent.
json& key_slot(json& j, const std::string& section, const std::string& key) {
  std::string path = "/" + section + "/" + key;
  std::replace(path.begin(), path.end(), '.', '/');
  return j[json::json_pointer(path)];
}

// A value as the user would write it, cut short so one bad array keeps the error one line.
std::string show(const json& value) {
  std::string s = value.dump();
  return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

// Megatron and Hugging Face names that users bring along, and ours for them.
constexpr std::pair<std::string_view, std::string_view> kForeignNames[] = {
    {"num_layers", "model.n_layer"},           {"num_hidden_layers", "model.n_layer"},
    {"num_attention_heads", "model.n_head"},   {"num_query_groups", "model.n_kv_head"},
    {"num_key_value_heads", "model.n_kv_head"}, {"hidden_size", "model.d_model"},
    {"ffn_hidden_size", "model.d_ff"},         {"intermediate_size", "model.d_ff"},
    {"seq_length", "model.seq_len"},           {"max_position_embeddings", "model.seq_len"},
    {"rotary_base", "model.rope_theta"},       {"init_method_std", "model.init_std"},
    {"learning_rate", "train.lr"},             {"max_lr", "train.lr"},
    {"train_iters", "train.steps"},
    {"lr_warmup_iters", "train.warmup"},       {"lr_decay_style", "train.decay"},
    {"tensor_model_parallel_size", "parallel.tp"}, {"pipeline_model_parallel_size", "parallel.pp"},
    {"context_parallel_size", "parallel.cp"},
    {"expert_model_parallel_size", "parallel.ep"}, {"expert_tensor_parallel_size", "parallel.etp"},
    {"recompute_granularity", "train.recompute"},
    {"use_distributed_optimizer", "parallel.distributed_optimizer"},
    {"num_experts", "moe.num_experts"},        {"num_local_experts", "moe.num_experts"},
    {"moe_router_topk", "moe.top_k"},          {"num_experts_per_tok", "moe.top_k"},
    {"moe_ffn_hidden_size", "moe.ffn_hidden"}, {"moe_intermediate_size", "moe.ffn_hidden"},
    {"moe_layer_freq", "moe.layer_freq"},      {"moe_aux_loss_coeff", "moe.aux_loss_coeff"},
    {"router_aux_loss_coef", "moe.aux_loss_coeff"}, {"moe_z_loss_coeff", "moe.z_loss_coeff"},
    {"moe_expert_capacity_factor", "moe.capacity_factor"},
    {"n_group", "moe.route_groups"},           {"moe_router_num_groups", "moe.route_groups"},
    {"topk_group", "moe.route_groups_topk"},   {"moe_router_group_topk", "moe.route_groups_topk"},
    {"first_k_dense_replace", "moe.dense_layers"},
    {"num_nextn_predict_layers", "model.mtp_depth"}, {"mtp_num_layers", "model.mtp_depth"},
    {"mtp_loss_scaling_factor", "model.mtp_loss_weight"},
    {"routed_scaling_factor", "moe.gate_scale"}, {"moe_router_topk_scaling_factor", "moe.gate_scale"},
};

std::string unknown_key_hint(const std::string& section, const std::string& key) {
  for (const auto& [foreign, ours] : kForeignNames)
    if (key == foreign) return did_you_mean(std::string(ours));
  std::vector<std::string> same_section;
  std::string elsewhere;  // the same key in another section
  for (const Field& f : schema()) {
    if (f.section == section) same_section.push_back(f.key);
    else if (f.key == key) elsewhere = f.section + "." + f.key;
  }
  const std::string guess = closest_word(key, same_section);
  // A one-letter slip in this section beats the exact key in another (data.path is data.paths).
  if (!guess.empty() && (elsewhere.empty() || edit_distance(key, guess) <= 1))
    return did_you_mean(section + "." + guess);
  return did_you_mean(elsewhere);
}

// Whether some key of the section lies within the object `prefix` (finetune's lora).
bool is_object_key(const std::string& section, const std::string& prefix) {
  for (const Field& f : schema())
    if (f.section == section && f.key.starts_with(prefix + ".")) return true;
  return false;
}

// The keys of `object` (the section's, or an object within it at `prefix`) are all fields.
void check_keys(const std::string& section, const json& object, const std::string& prefix) {
  for (const auto& item : object.items()) {
    const std::string key = prefix.empty() ? item.key() : prefix + "." + item.key();
    if (find_field(section, key)) continue;
    if (!is_object_key(section, key))
      fail("config: unknown key " + section + "." + key + unknown_key_hint(section, key));
    if (!item.value().is_object())
      fail("config: " + section + "." + key + " must be an object, got " + show(item.value()));
    check_keys(section, item.value(), key);
  }
}

// Unknown sections and keys are errors, not ignored: a typo would otherwise silently
// train with the default.
void check_structure(const json& j) {
  if (!j.is_object()) fail("config: the top level must be an object of sections, got " + show(j));
  for (const auto& [name, section] : j.items()) {
    if (std::find(kSections.begin(), kSections.end(), name) == kSections.end())
      fail("config: unknown section " + show(name) + did_you_mean(closest_word(name, kSections)));
    if (!section.is_object())
      fail("config: section " + name + " must be an object, got " + show(section));
    check_keys(name, section, "");
  }
  for (const std::string& key : kRequired)
    if (!has_key(j, "model", key.c_str())) fail("config: model." + key + " is required");
}

[[noreturn]] void type_error(const std::string& name, const std::string& expected, const json& v) {
  fail("config: " + name + " must be " + expected + ", got " + show(v));
}

template <class T>
[[noreturn]] void range_error(const std::string& name, const json& v) {
  fail("config: " + name + " must be an integer from " + std::to_string(std::numeric_limits<T>::min()) +
       " to " + std::to_string(std::numeric_limits<T>::max()) + ", got " + show(v));
}

// 1e5 is an integer too; a float is accepted when it is whole and a double holds it exactly.
template <class T>
T read_integer(const std::string& name, const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (!std::in_range<T>(u)) range_error<T>(name, v);
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (!std::in_range<T>(i)) range_error<T>(name, v);
    return static_cast<T>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::trunc(d) == d) {
      constexpr double kExact = 9007199254740992.0;  // 2^53
      if (std::abs(d) > kExact || !std::in_range<T>(static_cast<int64_t>(d))) range_error<T>(name, v);
      return static_cast<T>(d);
    }
  }
  type_error(name, "an integer", v);
}

template <class T>
void read_value(const std::string& name, const json& v, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) type_error(name, "true or false", v);
    out = v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    out = read_integer<T>(name, v);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) type_error(name, "a number", v);
    out = v.get<double>();
    if (!std::isfinite(out)) type_error(name, "a finite number", v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) type_error(name, "a string", v);
    out = v.get<std::string>();
  } else if constexpr (std::is_same_v<T, SamplePrompts>) {
    const auto bad = [&] { type_error(name, "a string or a non-empty array of strings", v); };
    if (v.is_string()) {
      out.texts = {v.get<std::string>()};
      return;
    }
    if (!v.is_array() || v.empty()) bad();
    if (v.size() > SamplePrompts::kMax)
      fail("config: " + name + " lists " + std::to_string(v.size()) + " prompts; at most " +
           std::to_string(SamplePrompts::kMax) + " are sampled");
    out.texts.clear();
    for (const json& text : v) {
      if (!text.is_string()) bad();
      out.texts.push_back(text.get<std::string>());
    }
  } else {
    // A list, always: `--set data.paths=foo` is a slip for ["foo"] more often than a choice.
    if (!v.is_array()) type_error(name, "an array of strings, e.g. [\"data/kjv-bpe\"]", v);
    out.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      // A number is a blend weight in data.paths (0.7, "data/a", 0.3, "data/b").
      if (v[i].is_number()) {
        out.push_back(v[i].dump());
        continue;
      }
      if (!v[i].is_string()) type_error(name + "[" + std::to_string(i) + "]", "a string", v[i]);
      out.push_back(v[i].get<std::string>());
    }
  }
}

template <class T>
void at_least(const std::string& name, T value, std::type_identity_t<T> min) {
  if (!(value >= min)) fail("config: " + name + " must be >= " + show(min) + ", got " + show(value));
}

void positive(const std::string& name, double value) {
  if (!(value > 0)) fail("config: " + name + " must be > 0, got " + show(value));
}

void one_of(const std::string& name, const std::string& value, std::initializer_list<const char*> options) {
  std::string list;
  for (const char* o : options) {
    if (value == o) return;
    list += (list.empty() ? "" : ", ") + std::string(o);
  }
  fail("config: " + name + " must be one of " + list + ", got " + show(value));
}

// "a" must divide "b"; both are named so the user sees which two keys disagree.
void divides(const std::string& a_name, int64_t a, const std::string& b_name, int64_t b) {
  if (b % a != 0)
    fail("config: " + a_name + "=" + show(a) + " does not divide " + b_name + "=" + show(b));
}

std::optional<std::array<double, 3>> parse_split(std::string_view text) {
  std::array<double, 3> weights{0, 0, 0};
  size_t n = 0;
  for (;;) {
    const size_t comma = text.find(',');
    const std::string_view part = trim_blanks(text.substr(0, comma));
    if (n == weights.size() || part.empty()) return std::nullopt;
    double w = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), w);
    if (ec != std::errc() || end != part.data() + part.size() || !std::isfinite(w) || w < 0)
      return std::nullopt;
    weights[n++] = w;
    if (comma == text.npos) break;
    text.remove_prefix(comma + 1);
  }
  const double sum = weights[0] + weights[1] + weights[2];
  if (!(sum > 0)) return std::nullopt;
  for (double& w : weights) w /= sum;
  return weights;
}

// DeepSeek's latent attention: its widths, and what it does not combine with.
void validate_latent_attention(const ModelConfig& m) {
  if (!m.is_llama()) fail("config: model.attention=mla needs model.arch=llama (RMSNorm and rotary embeddings)");
  at_least("model.q_lora_rank", m.q_lora_rank, 0);
  at_least("model.kv_lora_rank", m.kv_lora_rank, 1);
  at_least("model.qk_nope_head_dim", m.qk_nope_head_dim, 1);
  at_least("model.qk_rope_head_dim", m.qk_rope_head_dim, 2);
  at_least("model.v_head_dim", m.v_head_dim, 1);
  if (m.qk_rope_head_dim % 2 != 0)
    fail("config: model.qk_rope_head_dim=" + show(m.qk_rope_head_dim) + " must be even (rotary embeddings turn pairs)");
  // The attention core reads every value head padded to a query head's width.
  if (m.v_head_dim > m.head_dim())
    fail("config: model.v_head_dim=" + show(m.v_head_dim) + " must be at most model.qk_nope_head_dim + "
         "model.qk_rope_head_dim = " + show(m.head_dim()));
  if ((m.n_kv_head > 0 && m.n_kv_head != m.n_head) || m.explicit_head_dim > 0 || m.qk_norm || m.attention_bias)
    fail("config: model.attention=mla sets its heads' widths itself (model.qk_nope_head_dim, qk_rope_head_dim, "
         "v_head_dim; a key and value head for every query head), without model.n_kv_head, model.head_dim, "
         "model.qk_norm or model.attention_bias");
}

void validate_model(const ModelConfig& m) {
  one_of("model.arch", m.arch, {"gpt2", "llama"});
  at_least("model.n_layer", m.n_layer, 1);
  at_least("model.n_head", m.n_head, 1);
  at_least("model.n_kv_head", m.n_kv_head, 0);
  at_least("model.d_model", m.d_model, 1);
  at_least("model.d_ff", m.d_ff, 0);
  at_least("model.vocab_size", m.vocab_size, 1);
  at_least("model.seq_len", m.seq_len, 1);
  at_least("model.head_dim", m.explicit_head_dim, 0);
  one_of("model.attention", m.attention, {"mha", "mla"});
  if (m.latent_attention()) validate_latent_attention(m);
  else if (m.explicit_head_dim == 0) divides("model.n_head", m.n_head, "model.d_model", m.d_model);
  if (m.n_kv_head > 0) divides("model.n_kv_head", m.n_kv_head, "model.n_head", m.n_head);
  if (m.is_llama() && !m.latent_attention() && m.head_dim() % 2 != 0)
    fail("config: the head dimension " + show(m.head_dim()) +
         " (model.head_dim, or model.d_model / model.n_head) must be even for arch llama (rotary "
         "embeddings rotate pairs of dimensions)");
  positive("model.rope_theta", m.rope_theta);
  if (m.attention_bias && !m.is_llama())
    fail("config: model.attention_bias is for arch llama (gpt2's layers have every bias already)");
  if (m.qk_norm && !m.is_llama()) fail("config: model.qk_norm is for arch llama (gpt2 normalises no heads)");
  if (!m.family.empty() && m.family != "mistral")
    fail("config: model.family must be empty (the model is named by its layers) or mistral, got " + show(m.family));
  if (m.family == "mistral" && (!m.is_llama() || m.attention_bias || m.qk_norm || m.moe.enabled()))
    fail("config: model.family=mistral names a dense Llama layer without attention biases or normalised heads "
         "(MistralForCausalLM's)");
  at_least("model.sliding_window", m.sliding_window, 0);
  if (m.sliding_window > 0 && !m.is_llama())
    fail("config: model.sliding_window is for arch llama (Mistral's and Mixtral's window)");
  if (m.sliding_window > 0 && m.sliding_window < m.seq_len)
    fail("config: model.sliding_window=" + show(m.sliding_window) + " is below model.seq_len=" + show(m.seq_len) +
         "; kiln's attention sees the whole sequence, which is the window's only up to its length");
  one_of("model.rope_scaling", m.rope_scaling, {"none", "llama3", "yarn"});
  if (m.rope_scaling != "none") {
    if (!m.is_llama())
      fail("config: model.rope_scaling=" + m.rope_scaling + " needs model.arch=llama (gpt2 has no rotary embeddings)");
    if (!(m.rope_scaling_factor >= 1.0))
      fail("config: model.rope_scaling_factor must be >= 1 (got " + show(m.rope_scaling_factor) + ")");
    if (m.rope_scaling == "llama3") {
      positive("model.rope_low_freq_factor", m.rope_low_freq_factor);
      if (!(m.rope_high_freq_factor > m.rope_low_freq_factor))
        fail("config: model.rope_high_freq_factor (" + show(m.rope_high_freq_factor) +
             ") must be above model.rope_low_freq_factor (" + show(m.rope_low_freq_factor) + ")");
    } else {
      positive("model.rope_beta_slow", m.rope_beta_slow);
      if (!(m.rope_beta_fast > m.rope_beta_slow))
        fail("config: model.rope_beta_fast (" + show(m.rope_beta_fast) + ") must be above model.rope_beta_slow (" +
             show(m.rope_beta_slow) + ")");
      if (!(m.rope_mscale >= 0) || !(m.rope_mscale_all_dim >= 0))
        fail("config: model.rope_mscale and model.rope_mscale_all_dim must be >= 0");
    }
    at_least("model.rope_original_seq_len", m.rope_original_seq_len, 1);
  }
  at_least("model.make_vocab_size_divisible_by", m.make_vocab_size_divisible_by, 1);
  positive("model.norm_eps", m.norm_eps);
  positive("model.init_std", m.init_std);
}

// "1,3,5": the listed layers, each once, below n_layer. Empty: none listed.
std::vector<int> parse_layer_list(const std::string& text, int n_layer) {
  std::vector<int> layers;
  std::string_view rest = text;
  while (!trim_blanks(rest).empty()) {
    const size_t comma = rest.find(',');
    const std::string_view part = trim_blanks(rest.substr(0, comma));
    int layer = -1;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), layer);
    if (ec != std::errc() || end != part.data() + part.size() || layer < 0 || layer >= n_layer)
      fail("config: moe.layers must list layer numbers from 0 to model.n_layer - 1 = " +
           show(n_layer - 1) + " separated by commas, got " + show(text));
    if (std::find(layers.begin(), layers.end(), layer) != layers.end())
      fail("config: moe.layers lists layer " + show(layer) + " twice");
    layers.push_back(layer);
    if (comma == rest.npos) break;
    rest.remove_prefix(comma + 1);
  }
  return layers;
}

void validate_moe(const MoeConfig& e, const ModelConfig& m) {
  at_least("moe.num_experts", e.num_experts, 0);
  if (!e.enabled()) return;
  // The run store keeps at most this many experts' loads a layer (store/types.h).
  if (e.num_experts > 1024)
    fail("config: moe.num_experts=" + show(e.num_experts) + " is more than the 1024 a layer kiln records");
  at_least("moe.top_k", e.top_k, 1);
  if (e.top_k > e.num_experts)
    fail("config: moe.top_k=" + show(e.top_k) + " is more than moe.num_experts=" + show(e.num_experts));
  at_least("moe.ffn_hidden", e.ffn_hidden, 0);
  at_least("moe.shared_experts", e.shared_experts, 0);
  at_least("moe.layer_freq", e.layer_freq, 1);
  parse_layer_list(e.layers, m.n_layer);
  one_of("moe.score", e.score, {"softmax", "sigmoid"});
  at_least("moe.aux_loss_coeff", e.aux_loss_coeff, 0.0);
  at_least("moe.z_loss_coeff", e.z_loss_coeff, 0.0);
  at_least("moe.bias_update_rate", e.bias_update_rate, 0.0);
  at_least("moe.capacity_factor", e.capacity_factor, 0.0);
  one_of("moe.drop_policy", e.drop_policy, {"probs", "position"});
  if (e.pad_to_capacity && e.capacity_factor == 0)
    fail("config: moe.pad_to_capacity needs moe.capacity_factor > 0 (dropless experts have no capacity)");
  positive("moe.gate_scale", e.gate_scale);
  at_least("moe.route_groups", e.route_groups, 1);
  if (e.num_experts % e.route_groups != 0)
    fail("config: moe.route_groups=" + show(e.route_groups) + " does not divide moe.num_experts=" +
         show(e.num_experts));
  at_least("moe.route_groups_topk", e.route_groups_topk, 1);
  if (e.route_groups_topk > e.route_groups)
    fail("config: moe.route_groups_topk=" + show(e.route_groups_topk) + " is more than moe.route_groups=" +
         show(e.route_groups));
  if (e.route_groups > 1 && e.route_groups_topk > e.top_k)
    fail("config: moe.route_groups_topk=" + show(e.route_groups_topk) + " is more than moe.top_k=" + show(e.top_k) +
         ": each group is scored by its best top_k / route_groups_topk experts, at least one");
  if (e.top_k > e.route_groups_topk * (e.num_experts / e.route_groups))
    fail("config: moe.top_k=" + show(e.top_k) + " is more than the " +
         show(e.route_groups_topk * (e.num_experts / e.route_groups)) + " experts of moe.route_groups_topk=" +
         show(e.route_groups_topk) + " groups");
  at_least("moe.dense_layers", e.dense_layers, 0);
  if (e.dense_layers > 0 && !e.layers.empty())
    fail("config: moe.dense_layers and moe.layers both choose the MoE layers; give one");
  if (e.dense_layers >= m.n_layer)
    fail("config: moe.dense_layers=" + show(e.dense_layers) + " leaves none of the model's " + show(m.n_layer) +
         " layers an MoE layer");
}

void validate_lora(const Config& c) {
  const LoraConfig& l = c.model.lora;
  at_least("finetune.lora.rank", l.rank, 0);
  if (!l.enabled()) return;
  positive("finetune.lora.alpha", l.alpha);
  if (!(l.dropout >= 0 && l.dropout < 1))
    fail("config: finetune.lora.dropout must be in [0, 1) (the fraction of each adapter's input dropped), got " +
         show(l.dropout));
  parse_lora_targets(l.targets, c.model);
  if (shard_level(c.parallel) >= ShardLevel::Gradients)
    fail("config: finetune.lora with parallel.shard=" + c.parallel.shard + " is not supported: the adapters are "
         "small and the frozen base is not sharded (set parallel.shard=optimizer or none)");
  if (c.model.latent_attention())
    fail("config: finetune.lora with model.attention=mla is not supported yet: its projections have no adapters");
  if (c.model.moe.enabled())
    fail("config: finetune.lora with MoE layers is not supported: the experts have no adapters "
         "(set finetune.lora.rank=0 or moe.num_experts=0)");
  if (c.precision.dtype == "fp8")
    fail("config: finetune.lora with precision.dtype=fp8 is not supported: the frozen base multiplies in "
         "bf16 (set precision.dtype=bf16)");
}

void validate_train(const TrainConfig& t) {
  at_least("train.steps", t.steps, 1);
  at_least("train.global_batch", t.global_batch, 1);
  at_least("train.micro_batch", t.micro_batch, 1);
  divides("train.micro_batch", t.micro_batch, "train.global_batch", t.global_batch);
  positive("train.lr", t.lr);
  if (!(t.min_lr >= 0 && t.min_lr <= t.lr))
    fail("config: train.min_lr must be in [0, train.lr=" + show(t.lr) + "], got " + show(t.min_lr));
  at_least("train.warmup", t.warmup, 0);
  one_of("train.decay", t.decay, {"cosine", "linear", "wsd", "constant"});
  one_of("train.recompute", t.recompute, {"none", "selective", "full"});
  if (!(t.wsd_decay_fraction > 0 && t.wsd_decay_fraction <= 1))
    fail("config: train.wsd_decay_fraction must be in (0, 1], got " + show(t.wsd_decay_fraction));
  at_least("train.weight_decay", t.weight_decay, 0.0);
  for (const auto& [name, beta] : {std::pair{"train.beta1", t.beta1}, std::pair{"train.beta2", t.beta2}})
    if (!(beta >= 0 && beta < 1)) fail("config: " + std::string(name) + " must be in [0, 1), got " + show(beta));
  positive("train.adam_eps", t.adam_eps);
  at_least("train.clip_grad", t.clip_grad, 0.0);
  at_least("train.log_interval", t.log_interval, 1);
  at_least("train.eval_interval", t.eval_interval, 0);
  at_least("train.eval_iters", t.eval_iters, 0);
  at_least("train.checkpoint_interval", t.checkpoint_interval, 0);
  if (t.checkpoint_dir.empty()) fail("config: train.checkpoint_dir is empty");
  at_least("train.checkpoint_keep", t.checkpoint_keep, 0);
  at_least("train.checkpoint_failures", t.checkpoint_failures, 1);
  at_least("train.sample_tokens", t.sample_tokens, 0);
  positive("train.sample_temperature", t.sample_temperature);
}

void validate_data(const DataConfig& d, const ModelConfig& m) {
  for (size_t i = 0; i < d.paths.size(); ++i)
    if (d.paths[i].empty()) fail("config: data.paths[" + std::to_string(i) + "] is empty");
  if (!parse_split(d.split))
    fail("config: data.split must be 1 to 3 comma-separated non-negative numbers with a positive sum "
         "(e.g. \"969,30,1\"), got " + show(d.split));
  // Any other spec names tokenizer files: the trainer loads them and checks the vocabulary.
  if (d.tokenizer.empty()) fail("config: data.tokenizer is empty (byte, or a tokenizer's files)");
  one_of("data.samples", d.samples, {"stream", "packed", "padded"});
  if (d.samples != "stream" && d.paths.size() > 1)
    fail("config: data.samples=" + d.samples + " reads one dataset; data.paths names " + show(d.paths.size()) +
         " entries (blends are for data.samples=stream)");
  if (d.samples == "packed" && !(d.reset_attention_mask && d.reset_position_ids && d.eod_mask_loss))
    fail("config: data.samples=packed needs data.reset_attention_mask, data.reset_position_ids and "
         "data.eod_mask_loss true, so that each packed document sees and predicts only itself");
  if (d.tokenizer == "byte" && m.vocab_size < kByteVocab)
    fail("config: model.vocab_size=" + show(m.vocab_size) + " is smaller than the " +
         show(kByteVocab) + " tokens of data.tokenizer=\"byte\"");
}

}  // namespace

const char* shard_name(ShardLevel level) {
  switch (level) {
    case ShardLevel::None:
      return "none";
    case ShardLevel::Optimizer:
      return "optimizer";
    case ShardLevel::Gradients:
      return "gradients";
    case ShardLevel::Parameters:
      return "parameters";
  }
  return "none";
}

ShardLevel shard_level(const ParallelConfig& parallel) {
  if (parallel.shard == "parameters") return ShardLevel::Parameters;
  if (parallel.shard == "gradients") return ShardLevel::Gradients;
  if (parallel.shard == "optimizer" || parallel.distributed_optimizer) return ShardLevel::Optimizer;
  return ShardLevel::None;
}

bool splits_backward(const ParallelConfig& parallel) {
  return parallel.schedule == "zb-h1" || v_shaped(parallel);
}

bool v_shaped(const ParallelConfig& parallel) { return parallel.schedule == "zbv" || parallel.schedule == "dualpipev"; }

int stage_chunk_count(const ParallelConfig& parallel) { return v_shaped(parallel) ? 2 : parallel.vpp; }

namespace {

// Layout rules that hold for any number of processes (Megatron checks the same at startup);
// whether this process can run the layout is the trainer's call.
void validate_parallel(const ParallelConfig& p, const ModelConfig& m) {
  at_least("parallel.tp", p.tp, 1);
  at_least("parallel.pp", p.pp, 1);
  at_least("parallel.vpp", p.vpp, 1);
  at_least("parallel.ep", p.ep, 1);
  at_least("parallel.cp", p.cp, 1);
  at_least("parallel.ddp_bucket_size", p.ddp_bucket_size, int64_t{1});
  positive("parallel.timeout_s", p.timeout_s);
  one_of("parallel.device_comm", p.device_comm, {"auto", "nccl", "mpi"});
  one_of("parallel.shard", p.shard, {"none", "optimizer", "gradients", "parameters"});
  one_of("parallel.schedule", p.schedule, {"1f1b", "zb-h1", "zbv", "dualpipev"});
  if (p.schedule == "zb-h1" && (p.pp < 2 || p.vpp > 1))
    fail("config: parallel.schedule=zb-h1 needs a pipeline of one chunk a stage (parallel.pp >= 2, parallel.vpp=1), "
         "got pp=" + show(p.pp) + ", vpp=" + show(p.vpp));
  if (v_shaped(p) && (p.pp < 2 || p.vpp > 1))
    fail("config: parallel.schedule=" + p.schedule + " places two chunks a stage in a V itself: it needs "
         "parallel.pp >= 2 and parallel.vpp=1, got pp=" + show(p.pp) + ", vpp=" + show(p.vpp));
  if (splits_backward(p) && shard_level(p) >= ShardLevel::Gradients)
    fail("config: parallel.schedule=" + p.schedule + " with parallel.shard=" + p.shard + " is not supported yet: "
         "its weight passes come after the units' gradients are reduced (set parallel.shard=optimizer or none)");
  at_least("parallel.shard_group", p.shard_group, 0);
  if (p.shard_group > 0 && shard_level(p) == ShardLevel::None)
    fail("config: parallel.shard_group=" + show(p.shard_group) + " needs parallel.shard (optimizer, gradients "
         "or parameters): it says over how many ranks the state is sharded");
  divides("parallel.tp", p.tp, "model.n_head", m.n_head);
  // With those unset, n_head | d_model and tp | n_head already imply the rest.
  if (m.n_kv_head > 0) divides("parallel.tp", p.tp, "model.n_kv_head", m.n_kv_head);
  if (m.d_ff > 0) divides("parallel.tp", p.tp, "model.d_ff", m.d_ff);
  if (m.padded_vocab() % p.tp != 0)
    fail("config: parallel.tp=" + show(p.tp) + " does not divide the padded vocab " +
         show(m.padded_vocab()) + "; raise model.make_vocab_size_divisible_by");
  if (p.cp > 1) divides("2 x parallel.cp", int64_t{2} * p.cp, "model.seq_len", m.seq_len);
  if (p.sequence_parallel)
    divides("parallel.tp", p.tp, p.cp > 1 ? "model.seq_len / parallel.cp" : "model.seq_len", m.seq_len / p.cp);
  if (p.cp > 1 && m.moe.enabled())
    fail("config: parallel.cp=" + show(p.cp) + " with MoE layers is not supported yet: context parallelism "
         "trains dense models (set parallel.cp=1 or moe.num_experts=0)");
  if (p.etp != 0 && p.etp != 1 && p.etp != p.tp)
    fail("config: parallel.etp=" + show(p.etp) + " must be 1 (whole experts) or parallel.tp=" + show(p.tp) +
         " (0 says the same)");
  if (p.etp == 1 && p.tp > 1 && !p.sequence_parallel)
    fail("config: parallel.etp=1 with parallel.tp=" + show(p.tp) + " needs parallel.sequence_parallel=true: "
         "each tensor rank routes its own share of the tokens");
  if (m.moe.enabled() && p.etp != 1)
    divides("parallel.tp", p.tp, m.moe.ffn_hidden > 0 ? "moe.ffn_hidden" : "model.d_ff (the experts' width)",
            m.expert_ffn_dim());
  if (p.ep > 1 && !m.moe.enabled())
    fail("config: parallel.ep=" + show(p.ep) + " splits the experts of MoE layers, and this model has "
         "none; set moe.num_experts or parallel.ep=1");
  if (p.ep > 1) divides("parallel.ep", p.ep, "moe.num_experts", m.moe.num_experts);
  at_least("parallel.first_stage_layers", p.first_stage_layers, 0);
  at_least("parallel.last_stage_layers", p.last_stage_layers, 0);
  if (p.vpp > 1 && p.pp == 1) fail("config: parallel.vpp=" + show(p.vpp) + " needs parallel.pp > 1");
  if (p.pp == 1 && (p.first_stage_layers > 0 || p.last_stage_layers > 0))
    fail("config: parallel.first_stage_layers and parallel.last_stage_layers need parallel.pp > 1");
  const int chunks = stage_chunk_count(p);
  if (p.first_stage_layers == 0 && p.last_stage_layers == 0) {
    divides(v_shaped(p) ? "2 x parallel.pp (the V's stages)" : "parallel.pp * parallel.vpp", int64_t{p.pp} * chunks,
            "model.n_layer", m.n_layer);
  } else {
    try {
      pipeline_layers(m.n_layer, p.pp, chunks, p.first_stage_layers, p.last_stage_layers);
    } catch (const Error& e) {
      fail(std::string("config: ") + e.what());
    }
  }
}

// Multi-token prediction: the depths the run store keeps a loss column for, and what the
// modules do not combine with yet.
void validate_mtp(const Config& c) {
  const ModelConfig& m = c.model;
  const int most = static_cast<int>(std::size(store::kMtpLossMembers));
  if (m.mtp_depth < 0 || m.mtp_depth > most)
    fail("config: model.mtp_depth must be in [0, " + show(most) + "] (the run store keeps a loss per depth), got " +
         show(m.mtp_depth));
  if (!(m.mtp_loss_weight >= 0) || !std::isfinite(m.mtp_loss_weight))
    fail("config: model.mtp_loss_weight must be a finite number >= 0, got " + show(m.mtp_loss_weight));
  if (m.mtp_depth == 0) return;
  if (!m.is_llama()) fail("config: model.mtp_depth needs model.arch=llama (DeepSeek's RMSNorm modules)");
  // Each depth reads the tokens k places ahead: across a context-parallel rank's chunk edge.
  if (c.parallel.cp > 1)
    fail("config: model.mtp_depth with parallel.cp=" + show(c.parallel.cp) + " is not supported yet: each depth "
         "reads tokens ahead of another rank's chunk (set parallel.cp=1)");
  if (splits_backward(c.parallel))
    fail("config: model.mtp_depth with parallel.schedule=" + c.parallel.schedule + " is not supported yet: the "
         "modules' weight gradients are not split from their input's (set parallel.schedule=1f1b)");
  if (m.lora.enabled())
    fail("config: model.mtp_depth with finetune.lora is not supported: the modules have no adapters");
}

// What backend.attention=cudnn cannot do, known from the config alone; the shapes and the
// GPU are checked when the CUDA backend starts (kernels/cudnn_attention_support.h).
void validate_attention(const Config& c) {
  one_of("backend.attention", c.backend.attention, {"auto", "cudnn", "kiln"});
  if (c.backend.attention != "cudnn") return;
  if (c.backend.device == "cpu")
    fail("config: backend.attention=cudnn needs backend.device=cuda; the CPU backend computes "
         "attention with kiln's kernels");
  if (c.precision.dtype == "fp32")
    fail("config: backend.attention=cudnn needs precision.dtype=bf16 or fp16; cuDNN's fused "
         "attention has no fp32 kernels");
  if (c.data.reset_attention_mask)
    fail("config: backend.attention=cudnn cannot reset attention at document boundaries "
         "(data.reset_attention_mask=true); use backend.attention=auto, which computes those "
         "rows with kiln's kernels");
}

void validate_alerts(const AlertsConfig& a) {
  at_least("alerts.window", a.window, 2);
  at_least("alerts.min_samples", a.min_samples, 2);
  if (a.min_samples > a.window)
    fail("config: alerts.min_samples=" + show(a.min_samples) + " is more than alerts.window=" + show(a.window));
  at_least("alerts.loss_zscore", a.loss_zscore, 0.0);
  at_least("alerts.grad_zscore", a.grad_zscore, 0.0);
  if (!(a.throughput_fraction >= 0 && a.throughput_fraction < 1))
    fail("config: alerts.throughput_fraction must be in [0, 1), got " + show(a.throughput_fraction));
  at_least("alerts.straggler_fraction", a.straggler_fraction, 0.0);
  at_least("alerts.straggler_steps", a.straggler_steps, 1);
  at_least("alerts.throughput_steps", a.throughput_steps, 1);
  at_least("alerts.stall_s", a.stall_s, 0.0);
  if (!(a.memory_fraction >= 0 && a.memory_fraction <= 1))
    fail("config: alerts.memory_fraction must be in [0, 1], got " + show(a.memory_fraction));
  positive("alerts.command_timeout_s", a.command_timeout_s);
  at_least("alerts.rewind_skip", a.rewind_skip, 0);
  at_least("alerts.max_rewinds", a.max_rewinds, 1);
  a.action_map();
}

void validate(const Config& c) {
  validate_model(c.model);
  validate_moe(c.model.moe, c.model);
  validate_lora(c);
  validate_train(c.train);
  validate_data(c.data, c.model);
  validate_parallel(c.parallel, c.model);
  validate_mtp(c);
  one_of("precision.dtype", c.precision.dtype, {"fp32", "bf16", "fp16", "fp8"});
  if (splits_backward(c.parallel) && c.precision.dtype == "fp8")
    fail("config: parallel.schedule=" + c.parallel.schedule + " with precision.dtype=fp8 is not supported yet: the "
         "FP8 products compute the weights' gradient with the input's (set parallel.schedule=1f1b)");
  one_of("precision.fp8_scaling", c.precision.fp8_scaling, {"delayed", "current"});
  at_least("precision.fp8_amax_history", c.precision.fp8_amax_history, 1);
  if (c.precision.fp8_margin < 0 || c.precision.fp8_margin > 30)
    fail("config: precision.fp8_margin must be between 0 and 30, got " + show(c.precision.fp8_margin));
  one_of("backend.device", c.backend.device, {"cpu", "cuda", "auto"});
  at_least("backend.threads", c.backend.threads, 0);
  validate_attention(c);
  validate_alerts(c.alerts);
}

// nlohmann prefixes "[json.exception.parse_error.101] "; the rest is the useful part.
std::string parse_message(const json::exception& e) {
  const std::string what = e.what();
  const size_t bracket = what.find("] ");
  return bracket == what.npos ? what : what.substr(bracket + 2);
}

json parse_json(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail("config: " + origin + ": " + parse_message(e));
  }
}

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("config: cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json(text.str(), path);
}

}  // namespace

void to_json(json& j, const SamplePrompts& prompts) {
  // One prompt is written as configs always wrote it.
  j = prompts.texts.size() == 1 ? json(prompts.first()) : json(prompts.texts);
}

bool MoeConfig::is_moe_layer(int layer) const {
  if (!enabled() || layer < dense_layers) return false;
  if (layers.empty()) return layer % layer_freq == 0;
  const std::vector<int> listed = parse_layer_list(layers, std::numeric_limits<int>::max());
  return std::find(listed.begin(), listed.end(), layer) != listed.end();
}

std::map<std::string, std::string> AlertsConfig::action_map() const {
  std::map<std::string, std::string> map;
  std::string_view rest = actions;
  while (!trim_blanks(rest).empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = trim_blanks(rest.substr(0, comma));
    const size_t eq = item.find('=');
    const std::string rule(trim_blanks(item.substr(0, eq)));
    const std::string action(eq == item.npos ? "" : trim_blanks(item.substr(eq + 1)));
    const bool known = std::any_of(std::begin(kAlertRules), std::end(kAlertRules),
                                   [&](const char* r) { return rule == r; });
    if (!known)
      fail("config: alerts.actions names no rule " + show(rule) + " (rules: nan, loss_spike, grad_spike, "
           "throughput, straggler, stall, memory); write rule=action, e.g. \"loss_spike=pause\"");
    // A NaN loss ends the run as failed at once: its weights are no longer numbers, and a
    // checkpoint of them would only push good ones out.
    if (rule == "nan") fail("config: alerts.actions cannot act on nan: a run whose loss is not a number ends failed");
    // Going back past the data that spiked is the loss's own remedy: another rule's cause
    // (a slow rank, a full device) is still there after a rewind.
    if (rule == "loss_spike")
      one_of("alerts.actions' action for loss_spike", action, {"pause", "checkpoint", "stop", "rewind"});
    else if (action == "rewind")
      fail("config: alerts.actions: rewind is the loss_spike rule's action alone (it goes back to the checkpoint "
           "before the spike); " + rule + " can pause, checkpoint or stop");
    else
      one_of("alerts.actions' action for " + rule, action, {"pause", "checkpoint", "stop"});
    if (!map.emplace(rule, action).second) fail("config: alerts.actions names " + rule + " twice");
    if (comma == rest.npos) break;
    rest.remove_prefix(comma + 1);
  }
  return map;
}

bool AlertsConfig::rewinds() const {
  const std::map<std::string, std::string> map = action_map();
  const auto spike = map.find("loss_spike");
  return enabled && loss_zscore > 0 && spike != map.end() && spike->second == "rewind";
}

int64_t AlertsConfig::rewind_reserve() const { return rewinds() ? int64_t{max_rewinds} * rewind_skip : 0; }

int64_t ModelConfig::padded_vocab() const {
  const int64_t multiple = std::max(make_vocab_size_divisible_by, 1);
  return (int64_t{vocab_size} + multiple - 1) / multiple * multiple;
}

std::array<double, 3> DataConfig::split_fractions() const {
  const auto weights = parse_split(split);
  if (!weights) fail("config: data.split " + show(split) + " is not 1 to 3 comma-separated weights");
  return *weights;
}

Config config_from_json(const json& j) {
  check_structure(j);
  Config c;
  for_each_field(c, [&](const char* section, const char* key, auto& out) {
    if (const json* v = key_value(j, section, key)) read_value(std::string(section) + "." + key, *v, out);
  });
  // Llama-family models untie the output layer; GPT-2 ties it. An explicit value wins.
  if (!has_key(j, "model", "tie_embeddings")) c.model.tie_embeddings = !c.model.is_llama();
  validate(c);
  return c;
}

json config_to_json(const Config& config) {
  json j = json::object();
  for_each_field(config, [&](const char* section, const char* key, const auto& value) {
    key_slot(j, section, key) = value;
  });
  return j;
}

void apply_override(json& j, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == assignment.npos)
    fail("config: override " + show(assignment) + " has no '='; write section.key=value, e.g. train.lr=3e-4");
  const std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  const size_t dot = path.find('.');
  const std::string section = path.substr(0, dot == path.npos ? 0 : dot);
  const std::string key = dot == path.npos ? "" : path.substr(dot + 1);
  // A key with dots names a value within an object of the section (finetune.lora.rank).
  const size_t last_dot = key.rfind('.');
  if (section.empty() || key.empty() || (last_dot != key.npos && !is_object_key(section, key.substr(0, last_dot))))
    fail("config: override " + show(assignment) + " must name section.key before '=', e.g. train.lr=3e-4");

  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;
  // A string key takes the text as written, so data.split=100 is "100", not the number 100.
  const Field* field = find_field(section, key);
  const bool string_key =
      field && (field->kind == Kind::String || field->kind == Kind::StringList || field->kind == Kind::Prompts);
  if (string_key && !value.is_string() && !value.is_array()) value = text;

  if (j.is_null()) j = json::object();
  if (!j.is_object()) fail("config: cannot apply " + show(assignment) + ": the config is not an object");
  json& target = j[section];
  if (target.is_null()) target = json::object();
  if (!target.is_object())
    fail("config: cannot apply " + show(assignment) + ": section " + section + " is not an object");
  if (last_dot != key.npos) {
    const json* above = key_value(j, section, key.substr(0, last_dot));
    if (above && !above->is_object())
      fail("config: cannot apply " + show(assignment) + ": " + section + "." + key.substr(0, last_dot) +
           " is not an object");
  }
  key_slot(j, section, key) = std::move(value);
}

std::vector<std::string> fit_to_steps(TrainConfig& train) {
  std::vector<std::string> warnings;
  if (train.warmup > train.steps) {
    warnings.push_back("train.warmup=" + show(train.warmup) + " is longer than train.steps=" + show(train.steps) +
                       "; warming up over all " + show(train.steps) + " steps");
    train.warmup = train.steps;
  }
  return warnings;
}

std::vector<std::string> schedule_changes(const TrainConfig& before, const TrainConfig& after) {
  std::vector<std::string> changes;
  const auto compare = [&](const char* key, const auto& a, const auto& b) {
    if (a != b) changes.push_back(std::string("train.") + key + " " + show(a) + " -> " + show(b));
  };
  compare("steps", before.steps, after.steps);
  compare("warmup", before.warmup, after.warmup);
  compare("lr", before.lr, after.lr);
  compare("min_lr", before.min_lr, after.min_lr);
  compare("decay", before.decay, after.decay);
  if (after.decay == "wsd") compare("wsd_decay_fraction", before.wsd_decay_fraction, after.wsd_decay_fraction);
  return changes;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return config_with_overrides(read_config_json(path), overrides);
}

json read_config_json(const std::string& path) {
  return path.empty() ? parse_json(kEmbeddedTinyConfig, "the embedded tiny config")
                      : read_json_file(path);
}

Config config_with_overrides(json j, const std::vector<std::string>& overrides) {
  for (const std::string& assignment : overrides) apply_override(j, assignment);
  return config_from_json(j);
}

}  // namespace kiln
