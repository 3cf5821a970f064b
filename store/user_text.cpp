#include "store/user_text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/run_names.h"
#include "base/utf8.h"
#include "store/error.h"

namespace kiln::store {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// One word of a recorded command line: its text as written (quotes included) and its value
// as the shell reads it.
struct Word {
  std::string raw;
  std::string value;
};

// Splits the line the way a POSIX shell would for the quoting kiln writes (single quotes,
// '\'' for a quote inside them, and backslash escapes outside).
std::vector<Word> split_words(std::string_view line) {
  std::vector<Word> words;
  Word word;
  bool quoted = false, in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (!quoted && (c == ' ' || c == '\t')) {
      if (in_word) words.push_back(std::move(word));
      word = {};
      in_word = false;
      continue;
    }
    in_word = true;
    word.raw += c;
    if (c == '\'') {
      quoted = !quoted;
    } else if (c == '\\' && !quoted && i + 1 < line.size()) {
      word.raw += line[++i];
      word.value += line[i];
    } else {
      word.value += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

constexpr std::string_view kHidden = "***";

// A value as kiln's recorded command lines quote it (cli/next_steps.h shell_quote): bare when
// it holds nothing the shell reads specially, else in single quotes.
std::string quoted(const std::string& value) {
  if (!value.empty() && value.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos) return value;
  std::string out = "'";
  for (const char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Where a secret value written in free text ends.
bool ends_value(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == '\'' || c == '"' || c == '&' || c == '#';
}

bool starts_with_lower(std::string_view text, size_t at, std::string_view prefix) {
  if (text.size() - at < prefix.size()) return false;
  for (size_t k = 0; k < prefix.size(); ++k)
    if (std::tolower(static_cast<unsigned char>(text[at + k])) != prefix[k]) return false;
  return true;
}

// A NAME of NAME=VALUE in free text whose value is hidden: names_secret's names, and those
// query strings give keys and signatures (?key=, &sig=, X-Amz-Signature=). A longer name
// ending in key is not one (data.json_key).
bool names_secret_value(std::string_view name) {
  if (names_secret(name)) return true;
  const std::string lowered = lower(name);
  const size_t cut = lowered.find_last_of("_-.");
  return lowered == "key" || lowered == "sig" || lowered.substr(cut == std::string::npos ? 0 : cut + 1) == "signature";
}

// The length of the value at text[at] (up to where ends_value says).
size_t value_length(std::string_view text, size_t at) {
  size_t end = at;
  while (end < text.size() && !ends_value(text[end])) ++end;
  return end - at;
}

void redact_json(nlohmann::json& value) {
  if (value.is_object()) {
    for (auto& [key, item] : value.items()) {
      const bool empty = item.is_null() || (item.is_string() && item.get_ref<const std::string&>().empty());
      if (names_secret(key) && !empty) item = kHidden;
      else redact_json(item);
    }
  } else if (value.is_array()) {
    for (nlohmann::json& item : value) redact_json(item);
  } else if (value.is_string()) {
    value = redact_secrets_in_text(value.get_ref<const std::string&>());
  }
}

}  // namespace

void require_utf8(std::string_view text, std::string_view what) {
  const size_t bad = invalid_utf8_offset(text);
  if (bad != std::string_view::npos)
    fail("store: " + std::string(what) + " is not valid UTF-8 (a bad byte at offset " +
         std::to_string(bad) + "); save it as UTF-8 text");
}

bool names_secret(std::string_view key) {
  const size_t dot = key.rfind('.');
  const std::string last = lower(dot == std::string_view::npos ? key : key.substr(dot + 1));
  std::vector<std::string> parts{""};
  for (const char c : last) {
    if (c == '_' || c == '-') parts.emplace_back();
    else parts.back() += c;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p == "token" || p == "secret" || p == "password" || p == "passwd" || p == "credential" ||
        p == "credentials" || p == "apikey")
      return true;
    if (p == "key" && i > 0 && (parts[i - 1] == "api" || parts[i - 1] == "access" || parts[i - 1] == "private"))
      return true;
  }
  return false;
}

std::string redact_command_line(std::string_view command_line) {
  const std::vector<Word> words = split_words(command_line);
  std::string line;
  bool hide_next = false;
  for (const Word& word : words) {
    std::string shown = word.raw;
    const std::string& v = word.value;
    const size_t equals = v.find('=');
    if (hide_next) {
      shown = kHidden;
    } else if (v.rfind("--", 0) == 0 && equals == std::string::npos) {
      hide_next = names_secret(v.substr(2));
    } else if (equals != std::string::npos) {
      // --token=T, --set=KEY=T, KEY=T
      std::string_view key = std::string_view(v).substr(0, equals);
      std::string_view prefix;
      if (key.rfind("--set", 0) == 0 && key.size() == 5) {
        const size_t second = v.find('=', equals + 1);
        if (second != std::string::npos) {
          prefix = std::string_view(v).substr(0, equals + 1);
          key = std::string_view(v).substr(equals + 1, second - equals - 1);
        }
      }
      const std::string_view bare = key.rfind("--", 0) == 0 ? key.substr(2) : key;
      if (names_secret(bare)) shown = std::string(prefix) + std::string(key) + "=" + std::string(kHidden);
    }
    if (shown == word.raw) {
      const std::string redacted = redact_secrets_in_text(v);
      if (redacted != v) shown = quoted(redacted);
    }
    if (hide_next && shown == kHidden) hide_next = false;
    line += (line.empty() ? "" : " ") + shown;
  }
  return line;
}

std::string redact_secrets_in_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    // scheme://user:password@host or scheme://token@host
    if (text.compare(i, 3, "://") == 0) {
      out += "://";
      i += 3;
      size_t end = i;
      while (end < text.size() && !ends_value(text[end]) && text[end] != '/' && text[end] != '?') ++end;
      const size_t at = text.substr(i, end - i).rfind('@');
      if (at != std::string_view::npos) {
        const std::string_view user = text.substr(i, at);
        const size_t colon = user.find(':');
        out += colon == std::string_view::npos ? std::string(kHidden)
                                               : std::string(user.substr(0, colon + 1)) + std::string(kHidden);
        out += '@';
        i += at + 1;
      }
      continue;
    }
    // Authorization: [Scheme ]CREDENTIALS
    if (starts_with_lower(text, i, "authorization:")) {
      size_t at = i + 14;
      while (at < text.size() && text[at] == ' ') ++at;
      size_t word = value_length(text, at);
      const std::string_view first = text.substr(at, word);
      const bool scheme = !first.empty() && at + word + 1 < text.size() && text[at + word] == ' ' &&
                          std::all_of(first.begin(), first.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
      if (scheme) {
        at += word + 1;
        word = value_length(text, at);
      }
      out += text.substr(i, at - i);
      if (word > 0) out += kHidden;
      i = at + word;
      continue;
    }
    // NAME=VALUE, NAME being the name characters just before the '='
    if (text[i] == '=') {
      size_t name_start = out.size();
      while (name_start > 0 && is_run_name_char(out[name_start - 1])) --name_start;
      const size_t length = value_length(text, i + 1);
      out += '=';
      ++i;
      if (length > 0 && names_secret_value(std::string_view(out).substr(name_start, out.size() - 1 - name_start))) {
        out += kHidden;
        i += length;
      }
      continue;
    }
    out += text[i++];
  }
  return out;
}

std::string redact_config_json(std::string_view config_json) {
  nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return redact_secrets_in_text(config_json);
  redact_json(config);
  return config.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json redact_config_value(std::string_view dotted_key, nlohmann::json value) {
  const bool empty = value.is_null() || (value.is_string() && value.get_ref<const std::string&>().empty());
  for (size_t start = 0; start <= dotted_key.size();) {
    const size_t dot = std::min(dotted_key.find('.', start), dotted_key.size());
    if (names_secret(dotted_key.substr(start, dot - start)) && !empty) return std::string(kHidden);
    start = dot + 1;
  }
  redact_json(value);
  return value;
}

}  // namespace kiln::store
