#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

constexpr size_t kValid = std::string_view::npos;

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_EQ(invalid_utf8_offset(""), kValid);
  EXPECT_EQ(invalid_utf8_offset("plain ASCII, longer than eight bytes"), kValid);
  EXPECT_EQ(invalid_utf8_offset("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\x89"), kValid);
  EXPECT_EQ(invalid_utf8_offset("\xef\xbf\xbf\xf4\x8f\xbf\xbf"), kValid);  // U+FFFF, U+10FFFF
  EXPECT_NO_THROW(check_utf8("\xed\x9f\xbf"));  // U+D7FF, below the surrogates
}

TEST(Utf8, CodePointOfEachLength) {
  EXPECT_EQ(code_point_of("A"), U'A');
  EXPECT_EQ(code_point_of("\u00e9"), U'\u00e9');
  EXPECT_EQ(code_point_of("\u3000"), U'\u3000');
  EXPECT_EQ(code_point_of("\U0001F600"), U'\U0001F600');
}

TEST(Utf8, NamesTheFirstBadByte) {
  EXPECT_EQ(invalid_utf8_offset("ab\xff"
                                "cd"),
            2u);
  EXPECT_EQ(invalid_utf8_offset("0123456789\x80"), 10u);   // a lone continuation byte
  EXPECT_EQ(invalid_utf8_offset("x\xc0\xaf"), 1u);         // overlong '/'
  EXPECT_EQ(invalid_utf8_offset("x\xe0\x80\xaf"), 1u);     // overlong, three bytes
  EXPECT_EQ(invalid_utf8_offset("\xed\xa0\x80"), 0u);      // a surrogate
  EXPECT_EQ(invalid_utf8_offset("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(invalid_utf8_offset("ok \xe6\x97"), 3u);       // cut short at the end
  EXPECT_EQ(invalid_utf8_offset("\xc3\xa9\xc3("), 2u);     // cut short by a new character
  try {
    check_utf8("abc\xfe");
    FAIL() << "no throw";
  } catch (const InvalidUtf8& e) {
    EXPECT_EQ(e.offset, 3u);
    EXPECT_EQ(e.byte, 0xfe);
    EXPECT_STREQ(e.what(), "text is not valid UTF-8: byte 0xfe at offset 3");
  }
}

TEST(Utf8, CompletePrefixDropsOnlyACharacterCutShort) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xc3\xa9"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xc3"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xf0\x9f\x8e"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xf0\x9f\x8e\x89"), 5u);
  EXPECT_EQ(utf8_complete_prefix("a\xe6\x97"), 1u);
}

}  // namespace
}  // namespace kiln
