#include "trainer/data/data_prepare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "tests/byte_level_tokenizer.h"
#include "tests/error_of.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/indexed_dataset.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::error_of;

class DataPrepare : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(testing::TempDir()) /
            ("kiln_data_prepare_" + std::string(info->name()) + "_" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  DataPrepareOptions byte_options(std::vector<std::string> inputs) const {
    DataPrepareOptions options;
    options.inputs = std::move(inputs);
    options.tokenizer = "byte";
    options.output = dir_ + "/out";
    return options;
  }

  // The text of each document of the dataset written at `prefix`, the byte tokenizer's ids
  // as bytes and its EOD as "|".
  static std::vector<std::string> documents(const std::string& prefix) {
    const IndexedDataset ds(prefix);
    std::vector<std::string> out;
    for (int64_t d = 0; d < ds.num_documents(); ++d) {
      const auto [begin, end] = ds.document_tokens(d);
      std::vector<int32_t> ids(static_cast<size_t>(end - begin));
      ds.read(begin, end - begin, ids.data());
      std::string text;
      for (const int32_t id : ids) text += id == ByteTokenizer::kEod ? '|' : static_cast<char>(id);
      out.push_back(text);
    }
    return out;
  }

  std::string dir_;
};

TEST_F(DataPrepare, BlankLineDocumentsWithTheirEodAndASummaryOfThem) {
  DataPrepareOptions options = byte_options({write("a.txt", "first doc\n\nsecond doc\nline two\n\n\nthird\n")});
  options.document_boundary = "blank-line";
  options.append_eod = true;
  const DataPrepareSummary summary = prepare_dataset(options, nullptr, {});
  EXPECT_EQ(documents(options.output),
            (std::vector<std::string>{"first doc|", "second doc\nline two|", "third|"}));
  EXPECT_EQ(summary.documents, 3);
  EXPECT_EQ(summary.empty_documents, 0);
  EXPECT_EQ(summary.tokens, 9 + 19 + 5 + 3);
  EXPECT_EQ(summary.bytes, 39);
  EXPECT_EQ(summary.tokenizer, "byte");
  EXPECT_EQ(summary.bin_path, options.output + ".bin");
  EXPECT_EQ(summary.idx_path, options.output + ".idx");
}

TEST_F(DataPrepare, OneDocumentPerFileAndEmptyFilesSkippedAndCounted) {
  const DataPrepareOptions options =
      byte_options({write("a.txt", "alpha\n\nbeta\n"), write("empty.txt", ""), write("b.txt", "gamma")});
  const DataPrepareSummary summary = prepare_dataset(options, nullptr, {});
  EXPECT_EQ(documents(options.output), (std::vector<std::string>{"alpha\n\nbeta\n", "gamma"}));
  EXPECT_EQ(summary.documents, 2);
  EXPECT_EQ(summary.empty_documents, 1);
}

TEST_F(DataPrepare, JsonlTakesTheTextUnderTheKeyOfEachLine) {
  DataPrepareOptions options =
      byte_options({write("a.jsonl", "{\"text\": \"one\", \"id\": 1}\n{\"text\": \"two\\nlines\"}\n")});
  options.json_key = "text";
  prepare_dataset(options, nullptr, {});
  EXPECT_EQ(documents(options.output), (std::vector<std::string>{"one", "two\nlines"}));
}

TEST_F(DataPrepare, AnyNumberOfWorkersWritesTheSameFiles) {
  std::string text;
  for (int i = 0; i < 40000; ++i) text += "line " + std::to_string(i) + (i % 7 == 0 ? "\n\n" : "\n");
  const std::string input = write("big.txt", text);
  std::vector<std::string> bins;
  for (const int workers : {1, 3}) {
    DataPrepareOptions options = byte_options({input});
    options.document_boundary = "blank-line";
    options.workers = workers;
    options.output = dir_ + "/out" + std::to_string(workers);
    prepare_dataset(options, nullptr, {});
    std::ifstream in(options.output + ".bin", std::ios::binary);
    bins.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_FALSE(bins[0].empty());
  EXPECT_EQ(bins[0], bins[1]);
}

TEST_F(DataPrepare, ProgressCountsTheBytesReadAndEndsFinishedWithEveryDocument) {
  const std::string text(3 << 20, 'x');  // three chunks
  const DataPrepareOptions options = byte_options({write("a.txt", text), write("b.txt", "short")});
  std::vector<DataPrepareProgress> reports;
  prepare_dataset(options, nullptr, [&](const DataPrepareProgress& p) { reports.push_back(p); });
  ASSERT_EQ(reports.size(), 5u) << "one a chunk of each file, and the end";
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(reports[i].bytes, (i + 1) << 20);
  for (const DataPrepareProgress& p : reports) EXPECT_EQ(p.total_bytes, text.size() + 5);
  EXPECT_FALSE(reports[3].finished);
  const DataPrepareProgress& last = reports.back();
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.bytes, text.size() + 5);
  EXPECT_EQ(last.documents, 2);
  EXPECT_EQ(last.tokens, static_cast<int64_t>(text.size() + 5));
}

TEST_F(DataPrepare, AnInputThatLooksLikeJsonlReadAsTextIsWarnedOf) {
  const std::string input = write("a.jsonl", "{\"text\": \"one\"}\n");
  char* text = nullptr;
  size_t size = 0;
  std::FILE* warnings = ::open_memstream(&text, &size);
  prepare_dataset(byte_options({input}), warnings, {});
  std::fclose(warnings);
  EXPECT_EQ(std::string(text, size), "data prepare: warning: " + input +
                                         " looks like JSONL; without --json-key KEY its JSON syntax is "
                                         "tokenized as text\n");
  std::free(text);
}

// A tokenizer whose tokenizer_config.json sets add_bos_token starts every document with its
// bos_token, as Hugging Face's tokenizer(text) does; its eos_token ends them.
TEST_F(DataPrepare, AddBosTokenStartsEveryDocument) {
  test::write_byte_level_tokenizer(dir_, {"<|begin_of_text|>", "<|end_of_text|>"},
                                   {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|end_of_text|>"},
                                    {"add_bos_token", true}});
  DataPrepareOptions options = byte_options({write("a.txt", "one\n\ntwo\n")});
  options.tokenizer = dir_;
  options.document_boundary = "blank-line";
  options.append_eod = true;
  prepare_dataset(options, nullptr, {});
  const IndexedDataset ds(options.output);
  std::vector<int32_t> ids(static_cast<size_t>(ds.num_tokens()));
  ds.read(0, ds.num_tokens(), ids.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{256, 'o', 'n', 'e', 257, 256, 't', 'w', 'o', 257}));
  EXPECT_EQ(ds.num_documents(), 2);
}

TEST_F(DataPrepare, BadOptionsAndInputsAreOneLineAndWriteNothing) {
  const std::string input = write("a.txt", "text");
  const auto error = [&](const std::function<void(DataPrepareOptions&)>& change) {
    DataPrepareOptions options = byte_options({input});
    change(options);
    return error_of([&] { prepare_dataset(options, nullptr, {}); });
  };
  EXPECT_EQ(error([](DataPrepareOptions& o) { o.inputs.clear(); }), "data prepare: no --input files given");
  EXPECT_EQ(error([&](DataPrepareOptions& o) { o.inputs.push_back(dir_ + "/none.txt"); }),
            "data prepare: input " + dir_ + "/none.txt does not exist");
  EXPECT_EQ(error([&](DataPrepareOptions& o) { o.inputs = {dir_}; }),
            "data prepare: input " + dir_ + " is a directory, not a file");
  EXPECT_EQ(error([](DataPrepareOptions& o) { o.document_boundary = "page"; }),
            "data prepare: unknown --document-boundary \"page\" (file or blank-line)");
  EXPECT_EQ(error([](DataPrepareOptions& o) {
              o.json_key = "text";
              o.document_boundary = "blank-line";
            }),
            "data prepare: --document-boundary is for plain text; with --json-key every JSONL line is a document");
  EXPECT_EQ(error([](DataPrepareOptions& o) { o.workers = 0; }), "data prepare: --workers 0 must be at least 1");
  EXPECT_EQ(error([&](DataPrepareOptions& o) { o.output = dir_ + "/out.bin"; }),
            "data prepare: --output " + dir_ + "/out.bin is a prefix: kiln writes PREFIX.bin and PREFIX.idx, so "
            "drop the .bin");
  EXPECT_EQ(error([&](DataPrepareOptions& o) { o.inputs = {write("blank.txt", "")}; }),
            "data prepare: the inputs hold no text (1 file(s), all empty or blank), so there is nothing to write");
  EXPECT_FALSE(fs::exists(dir_ + "/out.bin.bin"));
}

}  // namespace
}  // namespace kiln
