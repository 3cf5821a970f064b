// Ids of Llama 3- and Qwen-style tokenizer.json files against the reference: Hugging Face's
// JavaScript port of tokenizers (npm @huggingface/tokenizers, installed by scripts/setup.sh
// under tests/tokenizer/node_modules). Real Llama 3 and Qwen files cannot be fetched here, so the
// test builds tokenizer.json files of the same layout as theirs (each family's split regex with
// ByteLevel after it, Qwen's NFC normalizer, their added tokens) over a vocabulary kiln trains on
// the mixed corpus (prose in several scripts, code, numbers, whitespace runs), and compares the
// ids of that corpus, with decomposed accents added, token for token (docs/tokenizers.md). The
// Qwen file adds Qwen3's tokens that are not special (<think>, </think>, <tool_call>), which
// both match in any text, and the text of ids decoded without the special tokens agrees too.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/run_command.h"
#include "tests/test_files.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTokenizerTests = std::string(KILN_SOURCE_DIR) + "/tests/tokenizer";
const std::string kReference = kTokenizerTests + "/node_modules/@huggingface/tokenizers/dist/tokenizers.cjs";

// The two families' pre-tokenizer regexes, as their tokenizer.json files give them.
const std::string kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwenSplit =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A tokenizer.json of the family's layout over kiln's vocab.json + merges.txt in `dir`; the
// end of document and two chat tokens added after the vocabulary, and for Qwen (nfc) Qwen3's
// added tokens that are not special.
std::string family_json(const std::string& dir, const std::string& split, bool nfc, const std::string& eod) {
  json vocab = json::parse(std::ifstream(dir + "/vocab.json"));
  json merges = json::array();
  std::ifstream merges_file(dir + "/merges.txt");
  for (std::string line; std::getline(merges_file, line);)
    if (!line.empty() && !line.starts_with("#version")) merges.push_back(line);
  const int next = static_cast<int>(vocab.size()) - (vocab.contains("<|endoftext|>") ? 1 : 0);
  vocab.erase("<|endoftext|>");
  json added = json::array();
  int id = next;
  for (const std::string& text : {eod, std::string("<|im_start|>"), std::string("<|im_end|>")})
    added.push_back({{"id", id++}, {"content", text}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  if (nfc)
    for (const char* text : {"<think>", "</think>", "<tool_call>"})
      added.push_back({{"id", id++}, {"content", text}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", false}});
  const json doc = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nfc ? json{{"type", "NFC"}} : json(nullptr)},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", split}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", split == kLlama3Split}, {"vocab", vocab}, {"merges", merges}}}};
  const std::string path = dir + "/" + (nfc ? "qwen" : "llama3") + "-tokenizer.json";
  std::ofstream(path) << doc.dump();
  return path;
}

class HfTokenizerParity : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kReference)) << kReference << " is missing: run scripts/setup.sh (npm ci in tests/tokenizer)";
    dir_ = fresh_dir("hf_tokenizer_parity");
    const CommandResult trained = run_command(kiln + " tokenizer train --input " + kTokenizerTests +
                                              "/corpus.txt --vocab-size 700 --output " + dir_);
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    // The corpus, and accents written decomposed (a letter, then U+0301 or U+0308) that NFC composes.
    text_ = dir_ + "/text.txt";
    std::ofstream(text_) << text_of(kTokenizerTests + "/corpus.txt")
                         << "\nCafe\xcc\x81 nai\xcc\x88ve re\xcc\x81sume\xcc\x81   \t\n\n  co\xcc\x88operate 12345678\n"
                         << "<|im_start|>assistant\n" << kReasoning << "<|im_end|>\n";
    // Text with the added tokens that are not special and none that is.
    plain_ = dir_ + "/plain.txt";
    std::ofstream(plain_) << kReasoning << "\nno<think>space</think>between\n";
  }

  static constexpr const char* kReasoning =
      "<think>\nThe user wants 2+2.</think>\n\n<tool_call>\n{\"name\": \"add\"}\n</tool_call>";

  // What the reference writes: `output`, a JavaScript expression of the tokenizer t loaded
  // from `tokenizer` and of fs (the file is process.argv[3]).
  static CommandResult reference(const std::string& output, const std::string& tokenizer, const std::string& file) {
    return run_command("node -e 'const {Tokenizer} = require(process.argv[1]); const fs = require(\"fs\");"
                       " const t = new Tokenizer(JSON.parse(fs.readFileSync(process.argv[2], \"utf8\")), {});"
                       " process.stdout.write(" + output + ")' " + kReference + " " + tokenizer + " " + file);
  }

  // kiln's ids of a text, and the reference's (no special tokens added), as JSON arrays. The
  // reference matches every added token written in the text (the corpus writes <|endoftext|>),
  // as kiln does where special tokens are allowed; the ones that are not special kiln matches
  // in any text.
  std::pair<json, json> both_ids(const std::string& tokenizer, const std::string& text, bool allow_special = true) const {
    const CommandResult ours = run_command(kiln + " tokenize" + (allow_special ? " --allow-special" : "") +
                                           " --tokenizer " + tokenizer + " --input " + text);
    const CommandResult theirs = reference(
        "JSON.stringify(t.encode(fs.readFileSync(process.argv[3], \"utf8\"), {add_special_tokens: false}).ids)",
        tokenizer, text);
    EXPECT_EQ(ours.exit_code, 0) << ours.output;
    EXPECT_EQ(theirs.exit_code, 0) << theirs.output;
    return {json::parse(ours.output, nullptr, false), json::parse(theirs.output, nullptr, false)};
  }

  // kiln's text of ids without the special tokens, and the reference's (decode with
  // skip_special_tokens, its spaces left as they are).
  std::pair<std::string, std::string> both_texts(const std::string& tokenizer, const json& ids) const {
    const std::string ids_file = dir_ + "/ids.json";
    std::ofstream(ids_file) << ids.dump();
    const CommandResult ours =
        run_command(kiln + " tokenize --decode --skip-special-tokens --tokenizer " + tokenizer + " --input " + ids_file);
    const CommandResult theirs = reference(
        "t.decode(JSON.parse(fs.readFileSync(process.argv[3], \"utf8\")),"
        " {skip_special_tokens: true, clean_up_tokenization_spaces: false})",
        tokenizer, ids_file);
    EXPECT_EQ(ours.exit_code, 0) << ours.output;
    EXPECT_EQ(theirs.exit_code, 0) << theirs.output;
    return {ours.output, theirs.output};
  }

  std::string dir_, text_, plain_;
};

TEST_F(HfTokenizerParity, Llama3LayoutGivesTheReferencesIds) {
  const auto [ours, theirs] = both_ids(family_json(dir_, kLlama3Split, false, "<|end_of_text|>"), text_);
  ASSERT_TRUE(ours.is_array() && theirs.is_array());
  EXPECT_GT(ours.size(), 2000u);
  EXPECT_EQ(ours, theirs);
}

TEST_F(HfTokenizerParity, QwenLayoutWithNfcGivesTheReferencesIds) {
  const std::string qwen = family_json(dir_, kQwenSplit, true, "<|endoftext|>");
  const auto [ours, theirs] = both_ids(qwen, text_);
  ASSERT_TRUE(ours.is_array() && theirs.is_array());
  EXPECT_GT(ours.size(), 2000u);
  EXPECT_EQ(ours, theirs);
  // <think> (id 702, after the 699 of the vocabulary and three special tokens) is matched
  // without --allow-special too.
  const auto [plain_ours, plain_theirs] = both_ids(qwen, plain_, false);
  EXPECT_EQ(plain_ours, plain_theirs);
  EXPECT_EQ(std::count(plain_ours.begin(), plain_ours.end(), json(702)), 2);
  const auto [text, reference_text] = both_texts(qwen, theirs);
  EXPECT_EQ(text, reference_text);
  EXPECT_EQ(text.find("<|im_end|>"), std::string::npos);
  EXPECT_NE(text.find("<think>"), std::string::npos);
}

}  // namespace
}  // namespace kiln::test
