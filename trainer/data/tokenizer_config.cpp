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

// bos_token and eos_token are a string, an AddedToken object ({"content": ...}) or null.
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

}  // namespace

ChatTemplateSource read_chat_template(const std::string& tokenizer_spec, const std::string& override_file) {
  std::error_code ec;
  const fs::path folder = fs::is_directory(tokenizer_spec, ec) ? fs::path(tokenizer_spec)
                                                                : fs::path(tokenizer_spec).parent_path();
  ChatTemplateSource out;
  const fs::path config_path = folder / "tokenizer_config.json";
  if (tokenizer_spec != "byte" && fs::exists(config_path, ec)) {
    const std::string where = config_path.string();
    const json config = json::parse(read_small_file(where, kMaxConfigBytes, true, "tokenizer config"), nullptr, false);
    if (!config.is_object()) fail(where + ": not a JSON object");
    out.bos_token = token_text(config, "bos_token", where);
    out.eos_token = token_text(config, "eos_token", where);
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
