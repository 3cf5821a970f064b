#include "trainer/data/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "tests/test_files.h"
#include "trainer/data/bpe_byte_map.h"
#include "trainer/data/bpe_gpt2_files.h"
#include "trainer/data/bpe_trainer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::fresh_dir;

BpeModel small_bpe() {
  BpeTrainer trainer;
  trainer.add_text("the cat and the hat and the bat ");
  return trainer.train({270, 1});
}

void expect_error(const std::string& spec, const std::string& expected) {
  try {
    load_tokenizer(spec);
    ADD_FAILURE() << spec << " loaded; expected " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(LoadTokenizer, Byte) {
  const auto t = load_tokenizer("byte");
  EXPECT_EQ(t->name(), "byte");
  EXPECT_EQ(t->vocab_size(), 257);
  EXPECT_EQ(t->eod(), 256);
  EXPECT_EQ(t->stable_prefix("any\xff text"), 9u) << "bytes have no state to cut";
}

TEST(LoadTokenizer, DirectoryWithGpt2Files) {
  const std::string dir = fresh_dir("gpt2_files");
  write_gpt2_files(small_bpe(), dir);
  const auto t = load_tokenizer(dir);
  EXPECT_EQ(t->name(), dir);
  EXPECT_EQ(t->vocab_size(), 270);
  EXPECT_EQ(t->eod(), 269);
  EXPECT_LT(t->encode(" the cat").size(), 8u);
  EXPECT_EQ(t->decode(t->encode(" the cat")), " the cat");
}

TEST(LoadTokenizer, TokenizerJsonInADirectoryOrByName) {
  const BpeModel model = small_bpe();
  nlohmann::json vocab = nlohmann::json::object(), merges = nlohmann::json::array();
  for (const BpeToken& t : model.tokens) vocab[bytes_to_unicode(t.bytes)] = t.id;
  for (const auto& [l, r] : model.merges)
    merges.push_back(bytes_to_unicode(l) + " " + bytes_to_unicode(r));
  vocab["<|endoftext|>"] = model.eod;
  const nlohmann::json doc = {
      {"added_tokens", {{{"id", model.eod}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  const std::string dir = fresh_dir("hf");
  std::ofstream(dir + "/tokenizer.json") << doc.dump();
  fs::copy_file(dir + "/tokenizer.json", dir + "/custom-name.json");
  const auto gpt2_files = [&] {
    const std::string d = fresh_dir("hf_reference");
    write_gpt2_files(model, d);
    return load_tokenizer(d);
  }();
  for (const std::string& spec : {dir, dir + "/custom-name.json"}) {
    const auto t = load_tokenizer(spec);
    EXPECT_EQ(t->vocab_size(), 270) << spec;
    EXPECT_EQ(t->encode(" the hat, the cat"), gpt2_files->encode(" the hat, the cat")) << spec;
  }
}

TEST(LoadTokenizer, BadSpecsSayWhatIsWrong) {
  expect_error("", "the spec is empty");
  expect_error("/nonexistent/tok", "not byte, and no such file or directory");
  expect_error(fresh_dir("empty"), "holds neither vocab.json + merges.txt nor tokenizer.json");
  const std::string dir = fresh_dir("not_json");
  std::ofstream(dir + "/tokenizer.json") << "{ not json";
  expect_error(dir, "tokenizer.json: not JSON");
}

}  // namespace
}  // namespace kiln
