#include "trainer/data/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include <fmt/core.h>

#include "base/check.h"
#include "trainer/data/bpe_gpt2_files.h"
#include "trainer/data/bpe_hf_json.h"
#include "trainer/data/bpe_tokenizer.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/tokenizer_config.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// The id of a token's text: an added token's, else a vocabulary token's (its raw bytes); -1.
int32_t id_of_text(const BpeModel& model, const std::string& text) {
  for (const SpecialToken& s : model.specials)
    if (s.text == text) return s.id;
  for (const BpeToken& t : model.tokens)
    if (t.bytes == text) return t.id;
  return -1;
}

// The tokenizer_config.json beside the files, where there is one: its eos_token is the end of
// document, its bos_token, pad_token and add_bos_token the tokenizer's.
BpeModel with_token_config(BpeModel model, const std::string& spec) {
  const SpecialTokenTexts texts = read_special_token_texts(spec);
  const auto id = [&](const char* key, const std::string& text) {
    const int32_t found = id_of_text(model, text);
    if (found < 0) fail(fmt::format("tokenizer: {}: {} \"{}\" is not a token of {}", texts.where, key, text, spec));
    return found;
  };
  if (!texts.eos.empty()) model.eod = id("eos_token", texts.eos);
  if (!texts.bos.empty()) model.bos = id("bos_token", texts.bos);
  if (!texts.pad.empty()) model.pad = id("pad_token", texts.pad);
  if (model.eod < 0)
    fail(fmt::format("tokenizer: {}: no end-of-document token: no eos_token in a tokenizer_config.json beside it, "
                     "and none of <|endoftext|>, <|end_of_text|>, </s> among its added tokens",
                     spec));
  model.add_bos = texts.add_bos;
  if (model.add_bos && model.bos < 0)
    fail(fmt::format("tokenizer: {}: add_bos_token is true, and no bos_token names the token to add", texts.where));
  return model;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  if (spec.empty())
    fail("tokenizer: the spec is empty; give byte, a directory or a tokenizer.json");
  std::error_code ec;
  const fs::file_status st = fs::status(spec, ec);
  if (ec || !fs::exists(st))
    fail(fmt::format("tokenizer \"{}\": not byte, and no such file or directory", spec));
  if (fs::is_directory(st)) {
    const fs::path dir(spec);
    if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt"))
      return std::make_unique<BpeTokenizer>(
          with_token_config(read_gpt2_files((dir / "vocab.json").string(), (dir / "merges.txt").string()), spec),
          spec);
    if (fs::exists(dir / "tokenizer.json"))
      return std::make_unique<BpeTokenizer>(
          with_token_config(read_hf_tokenizer_json((dir / "tokenizer.json").string()), spec), spec);
    fail(
        fmt::format("tokenizer \"{}\": the directory holds neither vocab.json + merges.txt "
                    "nor tokenizer.json",
                    spec));
  }
  return std::make_unique<BpeTokenizer>(with_token_config(read_hf_tokenizer_json(spec), spec), spec);
}

std::vector<int64_t> text_bytes_per_id(const Tokenizer& tokenizer, int64_t size) {
  std::vector<int64_t> bytes(static_cast<size_t>(std::max<int64_t>(size, tokenizer.vocab_size())), 0);
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (id != tokenizer.eod())
      bytes[static_cast<size_t>(id)] =
          static_cast<int64_t>(tokenizer.decode(std::span<const int32_t>(&id, 1)).size());
  return bytes;
}

}  // namespace kiln
