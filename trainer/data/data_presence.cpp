#include "trainer/data/data_presence.h"

#include <charconv>
#include <filesystem>
#include <string>
#include <vector>

#include "base/check.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

bool is_weight(const std::string& entry) {
  double value = 0;
  const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), value);
  return ec == std::errc() && end == entry.data() + entry.size();
}

constexpr const char* kHowToPrepare =
    "prepare it with `kiln data prepare --input TEXT --tokenizer TOKENIZER --output PREFIX` (docs/data.md)";

}  // namespace

void check_data_present(const DataConfig& data) {
  std::vector<size_t> datasets, missing;
  for (size_t i = 0; i < data.paths.size(); ++i) {
    if (is_weight(data.paths[i])) continue;
    datasets.push_back(i);
    if (!fs::exists(data.paths[i] + ".idx")) missing.push_back(i);
  }
  // Weights with no prefixes between them: the blend's own parser says what is wrong.
  if (datasets.empty()) return;
  if (missing.size() == datasets.size())
    fail("data: no dataset of data.paths exists (no " + data.paths[missing.front()] +
         ".idx): for the demo corpus run scripts/prepare-kjv.sh (or make demo); for your own text, " +
         kHowToPrepare);
  if (!missing.empty())
    fail("data: data.paths[" + std::to_string(missing.front()) + "] \"" + data.paths[missing.front()] +
         "\" has no " + data.paths[missing.front()] + ".idx; " + kHowToPrepare);
  std::error_code ec;
  if (data.tokenizer != "byte" && !fs::exists(data.tokenizer, ec))
    fail("data: data.tokenizer \"" + data.tokenizer +
         "\" is not byte, and no such file or folder; give the tokenizer the data was prepared with "
         "(`kiln tokenizer train` makes one, docs/tokenizers.md)");
}

}  // namespace kiln
