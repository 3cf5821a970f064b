#include "trainer/data/jsonl.h"

#include <fmt/core.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/utf8.h"

namespace kiln {
namespace {

// nlohmann's messages start with "[json.exception.parse_error.101] parse error at line 1, ";
// a JSONL line is one line, so keep what follows.
std::string short_json_error(const std::string& what) {
  const size_t column = what.find("column ");
  return column == std::string::npos ? what : what.substr(column);
}

constexpr std::streamsize kSniffBytes = 1 << 20;

}  // namespace

nlohmann::json jsonl_object(std::string_view line, const std::string& where, uint64_t offset) {
  const size_t bad = invalid_utf8_offset(line);
  if (bad != std::string_view::npos)
    fail(fmt::format("{}: not valid UTF-8 at byte {} (0x{:02x})", where, offset + bad,
                     static_cast<unsigned char>(line[bad])));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    fail(fmt::format("{}: not JSON ({})", where, short_json_error(e.what())));
  }
  if (!doc.is_object())
    fail(fmt::format("{}: a JSONL line must be a JSON object, got {}", where, doc.type_name()));
  return doc;
}

std::string jsonl_string(nlohmann::json& object, const std::string& key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) fail(fmt::format("{}: no \"{}\" key", where, key));
  if (!it->is_string()) fail(fmt::format("{}: \"{}\" is {}, not a string", where, key, it->type_name()));
  return std::move(it->get_ref<std::string&>());
}

std::string jsonl_text(std::string_view line, const std::string& key, const std::string& where, uint64_t offset) {
  nlohmann::json doc = jsonl_object(line, where, offset);
  return jsonl_string(doc, key, where);
}

bool looks_like_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(kSniffBytes), '\0');
  in.read(text.data(), kSniffBytes);
  text.resize(static_cast<size_t>(in.gcount()));
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos || text[start] != '{') return false;
  const size_t end = text.find('\n', start);
  if (end == std::string::npos && text.size() == static_cast<size_t>(kSniffBytes)) return false;
  return nlohmann::json::parse(text.substr(start, end - start), nullptr, false).is_object();
}

void warn_of_jsonl(const std::vector<std::string>& inputs, const char* command, const char* what, std::FILE* err) {
  for (const std::string& path : inputs)
    if (looks_like_jsonl(path))
      fmt::print(err, "{}: warning: {} looks like JSONL; without --json-key KEY its JSON syntax is {} as text\n",
                 command, path, what);
}

}  // namespace kiln
