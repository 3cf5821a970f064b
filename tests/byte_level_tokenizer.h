// A Hugging Face tokenizer folder for tests: a tokenizer.json whose vocabulary is the 256 bytes
// (id b for byte b, no merges) followed by the added tokens given (special ones), and, when
// given, a tokenizer_config.json beside it.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/data/bpe_byte_map.h"

namespace kiln::test {

inline void write_byte_level_tokenizer(const std::string& dir, const std::vector<std::string>& added,
                                       const nlohmann::json& config = nullptr) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_unicode(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json tokens = nlohmann::json::array();
  for (size_t i = 0; i < added.size(); ++i)
    tokens.push_back({{"id", 256 + i}, {"content", added[i]}, {"special", true}});
  const nlohmann::json doc = {{"added_tokens", tokens},
                              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
                              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  std::ofstream(dir + "/tokenizer.json") << doc.dump();
  if (!config.is_null()) std::ofstream(dir + "/tokenizer_config.json") << config.dump();
}

}  // namespace kiln::test
