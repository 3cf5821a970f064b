#include "trainer/data/byte_tokenizer.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace {

TEST(ByteTokenizer, VocabularyIsBytesPlusEod) {
  EXPECT_EQ(ByteTokenizer::kEod, 256);
  EXPECT_EQ(ByteTokenizer::kVocabSize, 257);
  EXPECT_EQ(ByteTokenizer().name(), "byte");
}

TEST(ByteTokenizer, EncodesEachByteAsItsUnsignedValue) {
  const ByteTokenizer tok;
  // "é" is two UTF-8 bytes; high bytes must come out as 128..255, never negative.
  EXPECT_EQ(tok.encode("Hi \xc3\xa9\n"), (std::vector<int32_t>{72, 105, 32, 195, 169, 10}));
  EXPECT_EQ(tok.encode(std::string_view("a\0b", 3)), (std::vector<int32_t>{97, 0, 98}));
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(ByteTokenizer, RoundTripsEveryByte) {
  const ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<int32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[static_cast<size_t>(b)], b);
  EXPECT_EQ(tok.decode(ids), all);
}

TEST(ByteTokenizer, DecodeDropsEodAndIdsOutsideBytes) {
  const ByteTokenizer tok;
  const std::vector<int32_t> ids{104, 105, ByteTokenizer::kEod, 33, -1, 300, 10};
  EXPECT_EQ(tok.decode(ids), "hi!\n");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{}), "");
}

}  // namespace
}  // namespace kiln
