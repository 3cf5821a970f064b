#include "trainer/data/bpe_hf_json.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "trainer/data/bpe_byte_map.h"

namespace kiln {
namespace {

using nlohmann::json;

// Tokens that end a document in the tokenizers people train with: GPT-2 and most
// byte-level BPEs, Llama 3, then the SentencePiece-era convention.
constexpr const char* kEodNames[] = {"<|endoftext|>", "<|end_of_text|>", "</s>"};

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  fail(fmt::format("tokenizer: {}: {}", path, what));
}

// The normalizers kiln computes: NFC, alone or as the one step of a Sequence. True for NFC.
bool read_normalizer(const std::string& path, const json& normalizer) {
  const std::string type = normalizer.value("type", std::string("?"));
  if (type == "NFC") return true;
  if (type == "Sequence" && normalizer.contains("normalizers") && normalizer["normalizers"].is_array()) {
    bool nfc = false;
    for (const json& step : normalizer["normalizers"]) nfc = read_normalizer(path, step) || nfc;
    return nfc;
  }
  refuse(path, "the normalizer " + type + " is not supported: kiln computes NFC (Qwen's) or none");
}

// A field that is absent or null counts as its default; any other value must equal it.
void expect_default(const std::string& path, const json& object, const char* key,
                    const json& fallback, const std::string& where) {
  if (!object.contains(key) || object[key].is_null() || object[key] == fallback) return;
  refuse(path, fmt::format("{}.{} = {} is not supported (kiln reads byte-level BPE with {} = {})",
                           where, key, object[key].dump(), key, fallback.dump()));
}

// The byte-level step: with use_regex it splits by GPT-2's pattern itself.
void read_byte_level(const std::string& path, const json& step, const std::string& where,
                     bool regex_expected, BpeModel& model) {
  expect_default(path, step, "add_prefix_space", false, where);
  const bool use_regex = step.value("use_regex", true);
  if (use_regex != regex_expected)
    refuse(path, fmt::format("{}.use_regex = {} is not supported here", where, use_regex));
  if (use_regex) model.pattern = Pretokenizer::kGpt2Pattern;
}

void read_pre_tokenizer(const std::string& path, const json& pre, BpeModel& model) {
  const std::string type = pre.is_object() ? pre.value("type", "") : "";
  if (type == "ByteLevel") {
    read_byte_level(path, pre, "pre_tokenizer", true, model);
    return;
  }
  if (type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array() &&
      pre["pretokenizers"].size() == 2) {
    const json& split = pre["pretokenizers"][0];
    const json& byte_level = pre["pretokenizers"][1];
    if (split.value("type", "") == "Split" && byte_level.value("type", "") == "ByteLevel" &&
        split.contains("pattern") && split["pattern"].contains("Regex") &&
        split["pattern"]["Regex"].is_string()) {
      if (split.value("behavior", "") != "Isolated" || split.value("invert", false))
        refuse(path, "pre_tokenizer Split must have behavior Isolated and invert false");
      model.pattern = split["pattern"]["Regex"].get<std::string>();
      read_byte_level(path, byte_level, "pre_tokenizer.pretokenizers[1]", false, model);
      return;
    }
  }
  refuse(path,
         "pre_tokenizer must be ByteLevel, or a Sequence of a Split on a Regex and "
         "ByteLevel; got " +
             pre.dump().substr(0, 200));
}

std::pair<std::string, std::string> read_merge(const std::string& path, const json& merge,
                                               size_t rank) {
  std::string left, right;
  if (merge.is_string()) {  // "left right", as tokenizers before 0.20 write
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
      refuse(path,
             fmt::format("model.merges[{}] = \"{}\" is not two tokens and one space", rank, text));
    left = text.substr(0, space);
    right = text.substr(space + 1);
  } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
             merge[1].is_string()) {
    left = merge[0].get<std::string>();  // ["left", "right"], as later versions write
    right = merge[1].get<std::string>();
  } else {
    refuse(path, fmt::format("model.merges[{}] must be \"left right\" or [left, right]", rank));
  }
  std::optional<std::string> l = unicode_to_bytes(left), r = unicode_to_bytes(right);
  if (!l || !r)
    refuse(path, fmt::format("model.merges[{}] = \"{} {}\" is not in GPT-2's byte-level form", rank,
                             left, right));
  return {std::move(*l), std::move(*r)};
}

}  // namespace

BpeModel read_hf_tokenizer_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(fmt::format("tokenizer: cannot open {}: {}", path, std::strerror(errno)));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    refuse(path, std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object() || !doc.contains("model") || !doc["model"].is_object())
    refuse(path, "no \"model\" object; is this a Hugging Face tokenizer.json?");
  const json& m = doc["model"];
  if (m.value("type", "BPE") != "BPE")
    refuse(path, "model.type is " + m["type"].dump() + "; kiln reads BPE models only");
  BpeModel model;
  if (doc.contains("normalizer") && !doc["normalizer"].is_null()) model.nfc = read_normalizer(path, doc["normalizer"]);
  expect_default(path, m, "dropout", nullptr, "model");
  expect_default(path, m, "continuing_subword_prefix", "", "model");
  expect_default(path, m, "end_of_word_suffix", "", "model");
  expect_default(path, m, "byte_fallback", false, "model");

  read_pre_tokenizer(path, doc.contains("pre_tokenizer") ? doc["pre_tokenizer"] : json(), model);
  model.ignore_merges = m.value("ignore_merges", false);

  if (!m.contains("vocab") || !m["vocab"].is_object())
    refuse(path, "model.vocab must be an object");
  if (!m.contains("merges") || !m["merges"].is_array()) refuse(path, "model.merges must be a list");

  // Added tokens are matched whole, never merged into (the special ones when special tokens
  // are allowed, the others always); a vocab entry with the same id is the same token.
  std::vector<bool> added;
  if (doc.contains("added_tokens") && doc["added_tokens"].is_array()) {
    for (const json& t : doc["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string() || t["id"].get<int64_t>() < 0)
        refuse(path, "added_tokens entries need an integer id and a string content; got " +
                         t.dump().substr(0, 200));
      const auto id = t["id"].get<int32_t>();
      const std::string content = t["content"].get<std::string>();
      // These move the spaces around a token, or refuse to match it inside a word.
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (t.contains(flag) && t[flag] == true)
          refuse(path, fmt::format("added token \"{}\" has {} true, which kiln does not compute", content, flag));
      model.specials.push_back({id, content, t.contains("special") && t["special"] == true});
      if (added.size() <= static_cast<size_t>(id)) added.resize(static_cast<size_t>(id) + 1);
      added[static_cast<size_t>(id)] = true;
    }
  }
  for (const char* name : kEodNames) {
    for (const SpecialToken& s : model.specials) {
      if (s.text == name) {
        model.eod = s.id;
        break;
      }
    }
    if (model.eod >= 0) break;
  }

  for (const auto& [token, id_json] : m["vocab"].items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0)
      refuse(path, fmt::format("model.vocab[\"{}\"] must be a non-negative integer id", token));
    const auto id = id_json.get<int32_t>();
    if (static_cast<size_t>(id) < added.size() && added[static_cast<size_t>(id)]) continue;
    std::optional<std::string> bytes = unicode_to_bytes(token);
    if (!bytes)
      refuse(path, fmt::format("model.vocab token \"{}\" (id {}) is not in GPT-2's byte-level "
                               "form and is not an added token",
                               token, id));
    model.tokens.push_back({id, std::move(*bytes)});
  }
  const json& merges = m["merges"];
  model.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank)
    model.merges.push_back(read_merge(path, merges[rank], rank));
  return model;
}

}  // namespace kiln
