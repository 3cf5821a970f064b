#include "trainer/data/bpe_gpt2_files.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "trainer/data/bpe_byte_map.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(fmt::format("tokenizer: cannot open {}: {}", path, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out)
      fail(fmt::format("tokenizer: cannot write {}: {}", tmp.string(), std::strerror(errno)));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    fail(fmt::format("tokenizer: cannot rename {} onto {}: {}", tmp.string(), path.string(),
                     ec.message()));
}

}  // namespace

BpeModel read_gpt2_files(const std::string& vocab_path, const std::string& merges_path) {
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_file(vocab_path));
  } catch (const nlohmann::json::exception& e) {
    fail(fmt::format("tokenizer: {} is not JSON: {}", vocab_path, e.what()));
  }
  if (!vocab.is_object())
    fail(fmt::format("tokenizer: {} must be a JSON object from token to id", vocab_path));

  BpeModel model;
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > INT32_MAX)
      fail(fmt::format("tokenizer: {}: the id of \"{}\" must be a non-negative integer, got {}",
                       vocab_path, token, id_json.dump()));
    const auto id = id_json.get<int32_t>();
    std::optional<std::string> bytes = unicode_to_bytes(token);
    if (token == kGpt2EndOfText) {
      model.eod = id;
      model.specials.push_back({id, token});
    } else if (bytes) {
      model.tokens.push_back({id, std::move(*bytes)});
    } else {
      // Not in GPT-2's byte form (an added token with a real space, say): BPE can never
      // produce it, so it is matched whole, like <|endoftext|>.
      model.specials.push_back({id, token});
    }
  }
  if (model.eod < 0)
    fail(fmt::format("tokenizer: {} has no {} token, the end-of-document id", vocab_path,
                     kGpt2EndOfText));

  const std::string merges = read_file(merges_path);
  size_t line_no = 0;
  for (size_t pos = 0; pos < merges.size();) {
    size_t end = merges.find('\n', pos);
    if (end == std::string::npos) end = merges.size();
    std::string_view line(merges.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      fail(fmt::format("tokenizer: {} line {}: a merge is two tokens and one space, got \"{}\"",
                       merges_path, line_no, line));
    std::optional<std::string> left = unicode_to_bytes(line.substr(0, space));
    std::optional<std::string> right = unicode_to_bytes(line.substr(space + 1));
    if (!left || !right)
      fail(fmt::format("tokenizer: {} line {}: \"{}\" is not in GPT-2's byte-level form",
                       merges_path, line_no, line));
    model.merges.emplace_back(std::move(*left), std::move(*right));
  }
  return model;
}

void write_gpt2_files(const BpeModel& model, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(fmt::format("tokenizer: cannot create the directory {}: {}", dir, ec.message()));

  std::vector<std::pair<int32_t, std::string>> by_id;
  for (const BpeToken& t : model.tokens) by_id.emplace_back(t.id, bytes_to_unicode(t.bytes));
  for (const SpecialToken& s : model.specials) by_id.emplace_back(s.id, s.text);
  std::sort(by_id.begin(), by_id.end());
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (const auto& [id, token] : by_id) vocab[token] = id;
  write_file(fs::path(dir) / "vocab.json", vocab.dump() + "\n");

  // Hugging Face's reader skips the first line and expects the file to end with a newline.
  std::string merges = "#version: 0.2\n";
  for (const auto& [left, right] : model.merges)
    merges += bytes_to_unicode(left) + " " + bytes_to_unicode(right) + "\n";
  write_file(fs::path(dir) / "merges.txt", merges);
}

}  // namespace kiln
