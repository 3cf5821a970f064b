// End-to-end: kiln data prepare and kiln data inspect through the binary.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/random_words.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

TEST(DataCli, PreparesBlankLineDocumentsAndInspects) {
  const std::string dir = fresh_dir("data_cli");
  std::ofstream(dir + "/a.txt") << "first doc\n\nsecond doc\nline two\n\n\nthird\n";
  const CommandResult prep = run_command(kiln + " data prepare --input " + dir +
                                         "/a.txt --tokenizer byte"
                                         " --document-boundary blank-line --append-eod --output " +
                                         dir + "/out");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_NE(prep.output.find("3 documents"), std::string::npos) << prep.output;
  // 9 + 19 + 5 bytes of text and one end-of-document each: 36 tokens of 2 bytes.
  EXPECT_EQ(std::filesystem::file_size(dir + "/out.bin"), 36u * 2);

  const CommandResult inspect = run_command(kiln + " data inspect " + dir + "/out");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("first doc"), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("uint16"), std::string::npos) << inspect.output;
}

TEST(DataCli, OneDocumentPerFileByDefault) {
  const std::string dir = fresh_dir("data_cli_files");
  std::ofstream(dir + "/a.txt") << "alpha\n\nbeta\n";
  std::ofstream(dir + "/b.txt") << "gamma\n";
  const CommandResult prep = run_command(kiln + " data prepare --input " + dir + "/a.txt " + dir +
                                         "/b.txt --tokenizer byte --output " + dir + "/out");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_NE(prep.output.find("2 documents"), std::string::npos) << prep.output;
}

TEST(DataCli, BadInputIsOneLineAndNonZero) {
  const std::string dir = fresh_dir("data_cli_bad");
  for (const std::string& args :
       {" --input /nonexistent.txt --tokenizer byte --output " + dir + "/x",
        " --input " + std::string(KILN_SOURCE_DIR) + "/README.md --tokenizer nope --output " + dir +
            "/x"}) {
    const CommandResult r = run_command(kiln + " data prepare" + args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir + "/x.bin"));
  }
  std::ofstream(dir + "/broken.idx") << "not an index";
  std::ofstream(dir + "/broken.bin") << "";
  const CommandResult r = run_command(kiln + " data inspect " + dir + "/broken");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("broken.idx"), std::string::npos) << r.output;
}

std::vector<uint16_t> read_tokens(const std::string& bin) {
  const std::string bytes = read_text(bin);
  std::vector<uint16_t> tokens(bytes.size() / 2);
  std::memcpy(tokens.data(), bytes.data(), tokens.size() * 2);
  return tokens;
}

// Text with words, numbers, Unicode and whitespace, in blank-line separated documents.
std::string varied_documents(int words, unsigned seed) {
  const std::vector<std::string> vocabulary = {"the",         "then",
                                               "there",       "and",
                                               "it's",        "we'll",
                                               "12",          "3.5",
                                               "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
                                               "hello",       "!!",
                                               "?",           "\xf0\x9f\x8e\x89"};
  return random_words(vocabulary, words, seed);
}

// A BPE tokenizer trained on varied_documents, in dir/tok.
std::string train_tokenizer(const std::string& dir) {
  std::ofstream(dir + "/train.txt") << varied_documents(20000, 1);
  const CommandResult r = run_command(kiln + " tokenizer train --input " + dir +
                                      "/train.txt --vocab-size 400 --output " + dir + "/tok");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir + "/tok";
}

TEST(DataCli, JsonlWithJsonKey) {
  const std::string dir = fresh_dir("data_cli_jsonl");
  std::ofstream(dir + "/a.jsonl") << "{\"text\": \"hello\"}\n{\"text\": \"\"}\r\n\n"
                                     "{\"id\": 3, \"text\": \"w\\u00f6rld\"}";
  const CommandResult prep = run_command(kiln + " data prepare --input " + dir +
                                         "/a.jsonl --json-key text --tokenizer byte --append-eod"
                                         " --output " +
                                         dir + "/out");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_NE(prep.output.find("2 documents (1 empty skipped)"), std::string::npos) << prep.output;
  // "hello" + EOD, "wörld" (6 bytes) + EOD.
  EXPECT_EQ(read_tokens(dir + "/out.bin"), (std::vector<uint16_t>{'h', 'e', 'l', 'l', 'o', 256, 'w',
                                                                  0xc3, 0xb6, 'r', 'l', 'd', 256}));
}

// JSONL prepared as plain text would tokenize its braces and keys: that is said, not refused.
TEST(DataCli, JsonlWithoutAKeyIsWarnedOf) {
  const std::string dir = fresh_dir("data_cli_jsonl_warn");
  std::ofstream(dir + "/a.jsonl") << "{\"text\": \"hello\"}\n{\"text\": \"world\"}\n";
  std::ofstream(dir + "/b.txt") << "{not json} but text\n";
  const CommandResult prep = run_command(kiln + " data prepare --input " + dir + "/a.jsonl " + dir +
                                         "/b.txt --tokenizer byte --output " + dir + "/out");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_EQ(prep.output.rfind("data prepare: warning: " + dir +
                                  "/a.jsonl looks like JSONL; without --json-key KEY its JSON syntax is tokenized as "
                                  "text\n",
                              0),
            0u)
      << prep.output;
  EXPECT_EQ(prep.output.find("b.txt looks like"), std::string::npos) << prep.output;
}

TEST(DataCli, BadJsonlLineNamesFileAndLine) {
  const std::string dir = fresh_dir("data_cli_bad_jsonl");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"ok\"}\nnot json\n", "bad.jsonl:2: not JSON"},
      {"{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n", "bad.jsonl:3: no \"text\" key"},
      {"{\"text\": 5}\n", "bad.jsonl:1: \"text\" is number, not a string"},
      {"[1, 2]\n", "bad.jsonl:1: a JSONL line must be a JSON object"},
      {"{\"text\": \"ok\"}\n{\"text\": \"caf\xe9\"}\n",
       "bad.jsonl:2: not valid UTF-8 at byte 28 (0xe9)"},
  };
  for (const auto& [content, expected] : cases) {
    std::ofstream(dir + "/bad.jsonl", std::ios::binary) << content;
    const CommandResult r =
        run_command(kiln + " data prepare --input " + dir +
                    "/bad.jsonl --json-key text --tokenizer byte --output " + dir + "/x");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(is_one_line(r.output)) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir + "/x.bin"));
  }
}

// Workers change the speed, never the bytes: documents come back in input order, and a
// document longer than one segment is cut where the tokenizer's ids cannot change.
TEST(DataCli, WorkersGiveIdenticalFiles) {
  const std::string dir = fresh_dir("data_cli_workers");
  const std::string tok = train_tokenizer(dir);
  std::ofstream(dir + "/docs.txt") << varied_documents(400000, 2);  // about 2.6 MB
  std::ofstream(dir + "/big.txt") << varied_documents(600000, 3);   // one 4 MB document
  {
    std::ofstream jsonl(dir + "/docs.jsonl");
    std::mt19937 rng(4);
    for (int i = 0; i < 20000; ++i)
      jsonl
          << nlohmann::json{{"text", varied_documents(static_cast<int>(rng() % 60), rng())}}.dump()
          << "\n";
  }
  const std::vector<std::string> inputs = {
      " --input " + dir + "/docs.txt " + dir + "/big.txt --document-boundary blank-line",
      " --input " + dir + "/big.txt " + dir + "/docs.txt",
      " --input " + dir + "/docs.jsonl --json-key text"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string files[2];
    for (const int workers : {1, 4}) {
      const std::string out = dir + "/out" + std::to_string(i) + "_" + std::to_string(workers);
      const CommandResult r =
          run_command(kiln + " data prepare" + inputs[i] + " --tokenizer " + tok +
                      " --append-eod --workers " + std::to_string(workers) + " --output " + out);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      files[workers == 1 ? 0 : 1] = read_text(out + ".bin") + read_text(out + ".idx");
    }
    EXPECT_TRUE(files[0] == files[1]) << inputs[i];
  }
  // The long document, cut into segments, has the ids of the whole.
  const CommandResult whole =
      run_command(kiln + " tokenize --tokenizer " + tok + " --input " + dir + "/big.txt");
  ASSERT_EQ(whole.exit_code, 0);
  const auto ids = nlohmann::json::parse(whole.output).get<std::vector<uint16_t>>();
  const std::vector<uint16_t> written = read_tokens(dir + "/out1_1.bin");
  ASSERT_GT(written.size(), ids.size());
  EXPECT_TRUE(std::equal(ids.begin(), ids.end(), written.begin()));
  const auto vocab = nlohmann::json::parse(read_text(tok + "/vocab.json"));
  EXPECT_EQ(written[ids.size()], vocab["<|endoftext|>"].get<uint16_t>())
      << "then the end of document";
}

TEST(DataCli, BpeDataInspectsAsText) {
  const std::string dir = fresh_dir("data_cli_bpe");
  const std::string tok = train_tokenizer(dir);
  std::ofstream(dir + "/a.txt") << "the hello there\n\nwe'll caf\xc3\xa9 then\n";
  const CommandResult prep =
      run_command(kiln + " data prepare --input " + dir + "/a.txt --tokenizer " + tok +
                  " --document-boundary blank-line --append-eod --output " + dir + "/out");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_NE(prep.output.find("2 documents"), std::string::npos) << prep.output;
  EXPECT_LT(std::filesystem::file_size(dir + "/out.bin"), 2u * 32) << "fewer tokens than bytes";

  CommandResult r =
      run_command(kiln + " data inspect " + dir + "/out --tokenizer " + tok + " --docs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("document 0 ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"the hello there<eod>\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"we'll caf\xc3\xa9 then<eod>\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("documents by length"), std::string::npos) << r.output;
  r = run_command(kiln + " data inspect " + dir + "/out");
  EXPECT_NE(r.output.find("ids; --tokenizer decodes them"), std::string::npos) << r.output;
}

TEST(DataCli, NonUtf8InputIsRefusedByBpe) {
  const std::string dir = fresh_dir("data_cli_utf8");
  const std::string tok = train_tokenizer(dir);
  std::ofstream(dir + "/a.txt", std::ios::binary) << "fine text\n\nsecond caf\xe9\n";
  const CommandResult r =
      run_command(kiln + " data prepare --input " + dir + "/a.txt --tokenizer " + tok +
                  " --document-boundary blank-line --output " + dir + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(is_one_line(r.output)) << r.output;
  EXPECT_NE(r.output.find("a.txt: not valid UTF-8 at byte 21 (0xe9)"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.bin"));
  const CommandResult bytes = run_command(kiln + " data prepare --input " + dir +
                                          "/a.txt --tokenizer byte --output " + dir + "/out");
  EXPECT_EQ(bytes.exit_code, 0) << "the byte tokenizer takes any bytes: " << bytes.output;
}

// A large JSONL streams through in bounded memory: peak RSS far below the input's size.
TEST(DataCli, LargeJsonlInBoundedMemory) {
  const std::string dir = fresh_dir("data_cli_memory");
  const std::string input = dir + "/big.jsonl";
  {
    std::ofstream out(input);
    std::string line = "{\"text\": \"" + std::string(2000, 'x') + " \\u00e9 the end\"}\n";
    for (int i = 0; out.tellp() < (std::streamoff{200} << 20); ++i) {
      line[10] = static_cast<char>('a' + i % 26);
      out << line;
    }
  }
  const pid_t pid = fork();
  if (pid == 0) {
    execl(kiln.c_str(), kiln.c_str(), "data", "prepare", "--input", input.c_str(), "--json-key",
          "text", "--tokenizer", "byte", "--workers", "2", "--output", (dir + "/out").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const double peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
  std::printf("data prepare of a %.0f MiB JSONL: peak RSS %.1f MiB\n",
              static_cast<double>(std::filesystem::file_size(input)) / (1 << 20), peak_mib);
  EXPECT_LT(peak_mib, 300.0);
  std::filesystem::remove_all(dir);  // 600 MiB of input and output
}

}  // namespace
}  // namespace kiln::test
