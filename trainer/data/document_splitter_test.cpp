#include "trainer/data/document_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace kiln {
namespace {

// Collects documents with the file offset of each one's first byte, checking that the
// pieces of a document are contiguous in the file.
class Collect : public DocumentSink {
 public:
  void text(std::string_view piece, uint64_t offset) override {
    if (open_.empty()) start_ = offset;
    EXPECT_EQ(offset, start_ + open_.size()) << "pieces of a document are contiguous";
    open_ += piece;
  }
  void end_document() override {
    docs.emplace_back(open_, start_);
    open_.clear();
  }
  std::vector<std::pair<std::string, uint64_t>> docs;

 private:
  std::string open_;
  uint64_t start_ = 0;
};

using Docs = std::vector<std::pair<std::string, uint64_t>>;

Docs split_blank_lines(const std::string& text, size_t chunk) {
  Collect sink;
  BlankLineSplitter splitter(sink);
  for (size_t at = 0; at < text.size(); at += chunk)
    splitter.feed(std::string_view(text).substr(at, chunk), at);
  splitter.end_file();
  return sink.docs;
}

TEST(BlankLineSplitter, BlocksBetweenBlankLinesWithTheirOffsets) {
  const std::string text =
      "first doc\n\nsecond doc\n  line two\n \t\n\nthird\r\n\r\n  fourth\r\nend\n";
  const Docs expected = {
      {"first doc", 0}, {"second doc\n  line two", 11}, {"third", 37}, {"  fourth\r\nend", 46}};
  for (const size_t chunk : {1, 3, 1000})
    EXPECT_EQ(split_blank_lines(text, chunk), expected) << chunk;
  EXPECT_TRUE(split_blank_lines("\n\n \n\t\n", 2).empty()) << "blank lines make no documents";
}

TEST(JsonlLineSplitter, LinesWithNumbersAndOffsets) {
  const std::string text = "{\"a\":1}\r\n\n   \n{\"b\":2}\n{\"c\":3}";
  for (const size_t chunk : {1, 4, 1000}) {
    std::vector<std::tuple<std::string, int64_t, uint64_t>> lines;
    JsonlLineSplitter splitter([&](std::string_view line, int64_t number, uint64_t offset) {
      lines.emplace_back(line, number, offset);
    });
    for (size_t at = 0; at < text.size(); at += chunk)
      splitter.feed(std::string_view(text).substr(at, chunk));
    splitter.end_file();
    const std::vector<std::tuple<std::string, int64_t, uint64_t>> expected = {
        {"{\"a\":1}", 1, 0}, {"{\"b\":2}", 4, 14}, {"{\"c\":3}", 5, 22}};
    EXPECT_EQ(lines, expected) << chunk;
  }
}

}  // namespace
}  // namespace kiln
