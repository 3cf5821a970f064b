#include "trainer/data/document_segments.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/error_of.h"
#include "trainer/data/byte_tokenizer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::error_of;

// The ids of the byte tokenizer for text.
std::vector<int32_t> byte_ids(const std::string& text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

TEST(SegmentBuilder, AShortDocumentIsOneSegmentAndALongOneIsCutWhereItsIdsAreFinal) {
  const ByteTokenizer tokenizer;
  const std::vector<std::string> inputs = {"a.txt", "b.txt"};
  std::vector<Segment> segments;
  SegmentBuilder builder(tokenizer, inputs, [&](Segment&& s) { segments.push_back(std::move(s)); });
  builder.start_file(0);
  builder.text("short", 0);
  builder.end_document();
  builder.start_file(1);
  const std::string piece(kSegmentBytes / 2, 'y');
  for (uint64_t at = 0; at < 3 * kSegmentBytes; at += piece.size()) builder.text(piece, at);
  builder.end_document();

  ASSERT_GE(segments.size(), 3u);
  EXPECT_EQ(segments[0].text, "short");
  EXPECT_EQ(segments[0].file, 0u);
  EXPECT_TRUE(segments[0].ends_document);
  // The long document: pieces of about kSegmentBytes, contiguous, the last one ending it.
  uint64_t at = 0;
  for (size_t i = 1; i < segments.size(); ++i) {
    EXPECT_EQ(segments[i].file, 1u);
    EXPECT_EQ(segments[i].offset, at);
    EXPECT_LE(segments[i].text.size(), kSegmentBytes + piece.size());
    EXPECT_EQ(segments[i].ends_document, i + 1 == segments.size());
    at += segments[i].text.size();
  }
  EXPECT_EQ(at, 3 * kSegmentBytes);
}

TEST(EncodeBatch, EachSegmentsIdsInOrderAndAJsonlLineNamedWhenBad) {
  const ByteTokenizer tokenizer;
  const std::vector<std::string> inputs = {"a.txt"};
  const EncodedBatch batch =
      encode_batch({{"ab", 0, 0, 0, false}, {"c", 0, 2, 0, true}, {"", 0, 3, 0, true}}, tokenizer, inputs, "");
  EXPECT_EQ(batch.ids, byte_ids("abc"));
  ASSERT_EQ(batch.segments.size(), 3u);
  EXPECT_EQ(batch.segments[0].ids, 2u);
  EXPECT_FALSE(batch.segments[0].ends_document);
  EXPECT_EQ(batch.segments[1].ids, 1u);
  EXPECT_TRUE(batch.segments[1].ends_document);
  EXPECT_EQ(batch.segments[2].ids, 0u);

  const std::vector<std::string> jsonl = {"a.jsonl"};
  EXPECT_EQ(encode_batch({{R"({"text": "hi"})", 0, 0, 1, true}}, tokenizer, jsonl, "text").ids, byte_ids("hi"));
  EXPECT_EQ(error_of([&] { encode_batch({{R"({"body": "hi"})", 0, 0, 7, true}}, tokenizer, jsonl, "text"); }),
            "data prepare: a.jsonl:7: no \"text\" key");
}

TEST(DocumentWriter, JoinsSegmentsIntoDocumentsWithTheirEodAndSkipsEmptyOnes) {
  const fs::path dir = fs::path(testing::TempDir()) / ("kiln_document_writer_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string prefix = (dir / "out").string();
  {
    IndexedDatasetWriter writer(prefix, ByteTokenizer::kVocabSize);
    DocumentWriter documents(writer, ByteTokenizer::kEod, true);
    // One document across two batches, an empty one, then one more.
    documents.write({byte_ids("hel"), {{3, false}}});
    documents.write({byte_ids("loab"), {{2, true}, {0, true}, {2, true}}});
    EXPECT_EQ(documents.empty_documents(), 1);
    EXPECT_EQ(writer.num_documents(), 2);
    EXPECT_EQ(writer.num_tokens(), 5 + 1 + 2 + 1);
    writer.finish();
  }
  const IndexedDataset ds(prefix);
  ASSERT_EQ(ds.num_documents(), 2);
  const auto [begin, end] = ds.document_tokens(0);
  std::vector<int32_t> ids(static_cast<size_t>(end - begin));
  ds.read(begin, end - begin, ids.data());
  std::vector<int32_t> expected = byte_ids("hello");
  expected.push_back(ByteTokenizer::kEod);
  EXPECT_EQ(ids, expected);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
