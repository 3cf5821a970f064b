#include "trainer/data/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include <fmt/core.h>

#include "base/check.h"
#include "trainer/data/bpe_gpt2_files.h"
#include "trainer/data/bpe_hf_json.h"
#include "trainer/data/bpe_tokenizer.h"
#include "trainer/data/byte_tokenizer.h"

namespace kiln {

namespace fs = std::filesystem;

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
          read_gpt2_files((dir / "vocab.json").string(), (dir / "merges.txt").string()), spec);
    if (fs::exists(dir / "tokenizer.json"))
      return std::make_unique<BpeTokenizer>(
          read_hf_tokenizer_json((dir / "tokenizer.json").string()), spec);
    fail(
        fmt::format("tokenizer \"{}\": the directory holds neither vocab.json + merges.txt "
                    "nor tokenizer.json",
                    spec));
  }
  return std::make_unique<BpeTokenizer>(read_hf_tokenizer_json(spec), spec);
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
