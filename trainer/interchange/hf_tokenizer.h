// A kiln tokenizer spec (data.tokenizer) as files of a Hugging Face model directory:
// GPT-2's vocab.json + merges.txt, or a tokenizer.json, copied as they are. The byte
// tokenizer has no Hugging Face equivalent and gives no files.
#pragma once

#include <string>
#include <vector>

#include "trainer/data/tokenizer.h"

namespace kiln {

struct TokenizerFile {
  std::string source;  // where it is now
  std::string name;    // its name in a model directory
};

// The files a spec names, chosen as load_tokenizer chooses them.
std::vector<TokenizerFile> tokenizer_files(const std::string& spec);

// The files beside a spec's tokenizer files that configure it, where there are: the
// tokenizer_config.json that names its special tokens and may hold a chat_template, and
// chat_template.jinja. An import keeps them, so the tokenizer keeps its end of document and
// a fine-tune finds the model's template (docs/finetune.md).
std::vector<TokenizerFile> chat_template_files(const std::string& spec);

// Copies the spec's files into dir and writes tokenizer_config.json: the spec's own (an
// import's) with model_max_length set, or one naming the Hugging Face class that reads the
// files and the end-of-document token as bos, eos and unk; returns the names written.
std::vector<std::string> write_hf_tokenizer(const std::string& spec, const Tokenizer& tokenizer,
                                            int64_t max_length, const std::string& dir);

}  // namespace kiln
