#include "trainer/data/tokenizer_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/private_files.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxConfigBytes = size_t{16} << 20;  // real configs are a few hundred KiB

// bos_token, eos_token and pad_token are a string, an AddedToken object ({"content": ...}) or null.
std::string token_text(const json& config, const char* key, const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  fail(where + ": " + key + " is neither a string nor an object with a string \"content\"");
}

// chat_template is a string, or a list of {"name", "template"} of which "default" is the one.
std::string config_template(const json& config, const std::string& where) {
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return "";
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const json& named : t)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string())
        return named["template"].get<std::string>();
    fail(where + ": chat_template is a list of named templates without one named \"default\"");
  }
  fail(where + ": chat_template is neither a string nor a list of named templates");
}

fs::path folder_of(const std::string& tokenizer_spec) {
  std::error_code ec;
  return fs::is_directory(tokenizer_spec, ec) ? fs::path(tokenizer_spec) : fs::path(tokenizer_spec).parent_path();
}


SpecialTokenTexts texts_of(const json& config, const std::string& where) {
  SpecialTokenTexts out;
  out.where = where;
  out.bos = token_text(config, "bos_token", where);
  out.eos = token_text(config, "eos_token", where);
  out.pad = token_text(config, "pad_token", where);
  if (config.contains("add_bos_token") && !config["add_bos_token"].is_null()) {
    if (!config["add_bos_token"].is_boolean()) fail(where + ": add_bos_token is neither true nor false");
    out.add_bos = config["add_bos_token"].get<bool>();
  }
  return out;
}

std::string config_path(const std::string& tokenizer_spec) {
  return (folder_of(tokenizer_spec) / "tokenizer_config.json").string();
}

}  // namespace

json read_tokenizer_config(const std::string& tokenizer_spec) {
  std::error_code ec;
  const std::string where = config_path(tokenizer_spec);
  if (tokenizer_spec == "byte" || !fs::exists(where, ec)) return nullptr;
  const json config = json::parse(read_small_file(where, kMaxConfigBytes, true, "tokenizer config"), nullptr, false);
  if (!config.is_object()) fail(where + ": not a JSON object");
  return config;
}

SpecialTokenTexts read_special_token_texts(const std::string& tokenizer_spec) {
  const std::string where = config_path(tokenizer_spec);
  const json config = read_tokenizer_config(tokenizer_spec);
  return config.is_null() ? SpecialTokenTexts{} : texts_of(config, where);
}

ChatTemplateSource read_chat_template(const std::string& tokenizer_spec, const std::string& override_file) {
  std::error_code ec;
  const fs::path folder = folder_of(tokenizer_spec);
  ChatTemplateSource out;
  const std::string where = config_path(tokenizer_spec);
  const json config = read_tokenizer_config(tokenizer_spec);
  if (!config.is_null()) {
    const SpecialTokenTexts tokens = texts_of(config, where);
    out.bos_token = tokens.bos;
    out.eos_token = tokens.eos;
    out.text = config_template(config, where);
    out.where = where;
  }
  const fs::path jinja_file = folder / "chat_template.jinja";
  if (!override_file.empty()) {
    out.text = read_small_file(override_file, kMaxConfigBytes, true, "chat template");
    out.where = override_file;
  } else if (tokenizer_spec != "byte" && fs::exists(jinja_file, ec)) {
    out.text = read_small_file(jinja_file.string(), kMaxConfigBytes, true, "chat template");
    out.where = jinja_file.string();
  }
  if (out.text.empty())
    fail("chat template: the tokenizer " + tokenizer_spec +
         " has none (no chat_template in tokenizer_config.json, no chat_template.jinja); give one with "
         "--chat-template FILE");
  return out;
}

}  // namespace kiln
