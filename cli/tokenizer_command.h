#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace kiln {

// kiln tokenizer train --input FILE... --vocab-size N --output DIR [--min-frequency F]
// kiln tokenize --tokenizer SPEC (--text STR | --input FILE) [--decode] [--allow-special]
void add_tokenizer_commands(CLI::App& app);

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;
  int32_t vocab_size = 0;
  std::string output;  // a directory: vocab.json + merges.txt go in it
  int64_t min_frequency = 2;
  std::string json_key;  // the inputs are JSONL: learn from the text under this key
};

struct TokenizeOptions {
  std::string tokenizer;
  std::string text;   // the text itself (or, with decode, a JSON array of ids) ...
  std::string input;  // ... or, when set, the file holding it
  bool decode = false;
  bool allow_special = false;
  bool skip_special = false;  // decode without the special tokens
};

// The handlers behind the subcommands. train writes progress and a summary to out;
// tokenize writes ids as a JSON array, or with decode the text exactly (no newline added),
// to out. Both throw kiln::Error.
void tokenizer_train(const TokenizerTrainOptions& options, std::FILE* out = stdout);
void tokenize(const TokenizeOptions& options, std::FILE* out = stdout);

}  // namespace kiln
