#include "monitor/format/config_text.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "monitor/format/figures.h"

namespace kiln {
namespace {

using nlohmann::json;

json parse(const std::string& config_json) {
  json config = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  return config.is_object() ? config : json::object();
}

// The value at section.key, or null.
const json& at(const json& config, const char* section, const char* key) {
  static const json null;
  const auto s = config.find(section);
  if (s == config.end() || !s->is_object()) return null;
  const auto k = s->find(key);
  return k == s->end() ? null : *k;
}

// Appends "<prefix><value>" when the key holds a number or text.
void add(std::vector<std::string>& parts, const json& value, const char* prefix) {
  if (value.is_number_integer()) {
    parts.push_back(fmt::format("{}{}", prefix, value.get<int64_t>()));
  } else if (value.is_number()) {
    parts.push_back(prefix + shortest(value.get<double>()));
  } else if (value.is_string()) {
    parts.push_back(prefix + value.get<std::string>());
  }
}

// "1 layer", "4 layers": a count of things, when the key holds a whole number.
void add_count(std::vector<std::string>& parts, const json& value, const char* noun) {
  if (!value.is_number_integer()) return;
  const int64_t n = value.get<int64_t>();
  parts.push_back(fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"));
}

}  // namespace

std::string config_summary(const std::string& config_json) {
  const json config = parse(config_json);
  std::vector<std::string> model;
  add(model, at(config, "model", "arch"), "");
  add_count(model, at(config, "model", "n_layer"), "layer");
  add(model, at(config, "model", "d_model"), "d_model ");
  add_count(model, at(config, "model", "n_head"), "head");
  // Grouped-query attention: worth saying only when it differs from n_head.
  const json& kv = at(config, "model", "n_kv_head");
  if (kv.is_number_integer() && kv.get<int64_t>() > 0 && kv != at(config, "model", "n_head"))
    add_count(model, kv, "kv head");
  add(model, at(config, "model", "seq_len"), "seq_len ");
  add(model, at(config, "model", "vocab_size"), "vocab ");

  std::vector<std::string> train;
  add_count(train, at(config, "train", "steps"), "step");
  add(train, at(config, "train", "global_batch"), "batch ");
  const json& micro = at(config, "train", "micro_batch");
  if (!train.empty() && train.back().starts_with("batch ") && micro.is_number_integer())
    train.back() += fmt::format(" (micro {})", micro.get<int64_t>());
  add(train, at(config, "train", "lr"), "lr ");

  if (model.empty()) return join(train, ", ");
  if (train.empty()) return join(model, ", ");
  return join(model, ", ") + "; " + join(train, ", ");
}

std::string config_value(const std::optional<std::string>& json_text) {
  if (!json_text) return kAbsent;
  const json value = json::parse(*json_text, nullptr, /*allow_exceptions=*/false);
  return value.is_string() ? value.get<std::string>() : *json_text;
}

}  // namespace kiln
