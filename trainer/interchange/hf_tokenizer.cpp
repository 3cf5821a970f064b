#include "trainer/interchange/hf_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "trainer/checkpoint/durable_file.h"
#include "trainer/data/tokenizer_config.h"

namespace kiln {

namespace fs = std::filesystem;

std::vector<TokenizerFile> tokenizer_files(const std::string& spec) {
  if (spec == "byte") return {};
  const fs::path path(spec);
  if (!fs::is_directory(path)) return {{spec, "tokenizer.json"}};
  if (fs::exists(path / "vocab.json") && fs::exists(path / "merges.txt"))
    return {{(path / "vocab.json").string(), "vocab.json"},
            {(path / "merges.txt").string(), "merges.txt"}};
  return {{(path / "tokenizer.json").string(), "tokenizer.json"}};
}

std::vector<TokenizerFile> chat_template_files(const std::string& spec) {
  if (spec == "byte") return {};
  const fs::path dir = fs::is_directory(spec) ? fs::path(spec) : fs::path(spec).parent_path();
  std::vector<TokenizerFile> files;
  for (const char* name : {"tokenizer_config.json", "chat_template.jinja"})
    if (fs::exists(dir / name)) files.push_back({(dir / name).string(), name});
  return files;
}

std::vector<std::string> write_hf_tokenizer(const std::string& spec, const Tokenizer& tokenizer,
                                            int64_t max_length, const std::string& dir) {
  const std::vector<TokenizerFile> files = tokenizer_files(spec);
  if (files.empty()) return {};
  std::vector<std::string> written;
  for (const TokenizerFile& f : files) {
    fs::copy_file(f.source, fs::path(dir) / f.name, fs::copy_options::overwrite_existing);
    written.push_back(f.name);
  }
  const int32_t eod = tokenizer.eod();
  const std::string eod_text = tokenizer.decode(std::span<const int32_t>(&eod, 1));
  const bool gpt2_pair = files.front().name == "vocab.json";
  nlohmann::json config = {
      {"tokenizer_class", gpt2_pair ? "GPT2Tokenizer" : "PreTrainedTokenizerFast"},
      {"bos_token", eod_text},
      {"eos_token", eod_text},
      {"unk_token", eod_text},
      {"add_prefix_space", false},
      {"model_max_length", max_length}};
  for (const TokenizerFile& f : chat_template_files(spec)) {
    if (f.name == "chat_template.jinja") {
      fs::copy_file(f.source, fs::path(dir) / f.name, fs::copy_options::overwrite_existing);
      written.push_back(f.name);
    }
  }
  // The tokenizer's own config (an import's) is what it was read with: its special tokens, its
  // add_bos_token and chat template go back as they came; the context is the model's.
  if (nlohmann::json source = read_tokenizer_config(spec); !source.is_null()) {
    config = std::move(source);
    config["model_max_length"] = max_length;
  }
  write_file_atomically((fs::path(dir) / "tokenizer_config.json").string(), config.dump(2) + "\n");
  written.push_back("tokenizer_config.json");
  return written;
}

}  // namespace kiln
