// The text stream never writes part of a UTF-8 character, writes every byte in the end,
// and passes bytes that are not UTF-8 through unchanged.
#include "base/utf8.h"
#include "trainer/train/text_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>


namespace kiln {
namespace {

std::vector<std::string> stream_bytes(const std::string& text, size_t piece) {
  std::vector<std::string> writes;
  TextStream stream([&](std::string_view s) { writes.emplace_back(s); });
  for (size_t i = 0; i < text.size(); i += piece) stream.add(text.substr(i, piece));
  stream.finish();
  return writes;
}

TEST(TextStream, NeverSplitsACharacter) {
  const std::string text = "a\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 z";  // a é € 😀 z
  for (size_t piece : {1u, 2u, 3u}) {
    std::string joined;
    for (const std::string& w : stream_bytes(text, piece)) {
      EXPECT_EQ(invalid_utf8_offset(w), std::string_view::npos) << "piece " << piece;
      joined += w;
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(TextStream, HoldsACutSequenceUntilTheEnd) {
  // The emoji's last byte never comes: the held bytes are written as they are at the end.
  const std::vector<std::string> writes = stream_bytes("ok \xf0\x9f\x98", 1);
  std::string joined;
  for (const std::string& w : writes) joined += w;
  EXPECT_EQ(joined, "ok \xf0\x9f\x98");
  EXPECT_EQ(writes.back(), "\xf0\x9f\x98");
}

TEST(TextStream, PassesBytesThatAreNotUtf8Through) {
  std::string joined;
  for (const std::string& w : stream_bytes("a\xff"
                                           "b\x80"
                                           "c",
                                           1))
    joined += w;
  EXPECT_EQ(joined,
            "a\xff"
            "b\x80"
            "c");
}

}  // namespace
}  // namespace kiln
