#include "trainer/data/pretokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/check.h"
#include "base/utf8.h"

namespace kiln {
namespace {

std::vector<std::string> pieces(const Pretokenizer& p, std::string_view text) {
  std::vector<size_t> ends;
  p.split(text, ends);
  std::vector<std::string> out;
  size_t begin = 0;
  for (const size_t end : ends) {
    out.emplace_back(text.substr(begin, end - begin));
    begin = end;
  }
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Pretokenizer, SplitsAsGpt2Does) {
  const Pretokenizer p;
  EXPECT_EQ(pieces(p, "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces(p, "it's we'll they're I'd"),
            (Pieces{"it", "'s", " we", "'ll", " they", "'re", " I", "'d"}));
  // The regex is case-sensitive: "'S" is not a contraction.
  EXPECT_EQ(pieces(p, "IT'S"), (Pieces{"IT", "'", "S"}));
  EXPECT_EQ(pieces(p, "abc123 4.5"), (Pieces{"abc", "123", " 4", ".", "5"}));
  // A whitespace run leaves its last space to the word after it.
  EXPECT_EQ(pieces(p, "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pieces(p, "x\n\ny"), (Pieces{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pieces(p, "end  "), (Pieces{"end", "  "}));
  EXPECT_EQ(pieces(p, "\ttab"), (Pieces{"\t", "tab"}));
  EXPECT_EQ(pieces(p, "...!!! ??"), (Pieces{"...!!!", " ??"}));
  EXPECT_EQ(pieces(p, "<|endoftext|>"), (Pieces{"<|", "endoftext", "|>"}));
}

TEST(Pretokenizer, IsUnicodeAware) {
  const Pretokenizer p;
  EXPECT_EQ(pieces(p, "na\xc3\xafve caf\xc3\xa9"), (Pieces{"na\xc3\xafve", " caf\xc3\xa9"}));
  // CJK ideographs are letters; a fullwidth comma is punctuation.
  EXPECT_EQ(pieces(p, "\xe6\x97\xa5\xe6\x9c\xac\xef\xbc\x8c\xe4\xb8\xad"),
            (Pieces{"\xe6\x97\xa5\xe6\x9c\xac", "\xef\xbc\x8c", "\xe4\xb8\xad"}));
  // Arabic-Indic digits are numbers.
  EXPECT_EQ(pieces(p, "x \xd9\xa3\xd9\xa4"), (Pieces{"x", " \xd9\xa3\xd9\xa4"}));
  // A combining mark is neither letter nor number: it starts a symbol piece.
  EXPECT_EQ(pieces(p, "cafe\xcc\x81"), (Pieces{"cafe", "\xcc\x81"}));
  // Emoji are symbols; U+3000 (ideographic space) is whitespace.
  EXPECT_EQ(pieces(p,
                   "\xf0\x9f\x8e\x89\xf0\x9f\x8e\x89\xe3\x80\x80"
                   "a"),
            (Pieces{"\xf0\x9f\x8e\x89\xf0\x9f\x8e\x89", "\xe3\x80\x80", "a"}));
}

TEST(Pretokenizer, LongRunsAreOnePiece) {
  const Pretokenizer p;
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(pieces(p, spaces + "x"), (Pieces{std::string((1 << 20) - 1, ' '), " x"}));
  const std::string letters(1 << 20, 'a');
  EXPECT_EQ(pieces(p, letters).size(), 1u);
}

TEST(Pretokenizer, UnmatchedTextIsAPieceOfItsOwn) {
  const Pretokenizer digits(R"(\p{N}{1,3})");
  EXPECT_EQ(pieces(digits, "ab12345cd"), (Pieces{"ab", "123", "45", "cd"}));
}

TEST(Pretokenizer, BadPatternIsAnError) {
  try {
    Pretokenizer p("(unclosed");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not compile"), std::string::npos) << e.what();
  }
}

// Cutting a text at stable_prefix and splitting the two parts gives the pieces of the whole,
// wherever the text happens to end.
TEST(Pretokenizer, StablePrefixNeverChangesThePieces) {
  const Pretokenizer p;
  std::string text;
  for (int i = 0; i < 40; ++i)
    text +=
        "It'll be 12.5% of \xe6\x97\xa5\xe6\x9c\xac   words\n\n\t'll 's caf\xc3\xa9 "
        "\xf0\x9f\x8e\x89!! ";
  const Pieces whole = pieces(p, text);
  for (size_t end = 0; end <= text.size(); end += 7) {
    const std::string_view chunk = std::string_view(text).substr(0, end);
    const size_t cut = p.stable_prefix(chunk);
    ASSERT_LE(cut, chunk.size());
    Pieces joined = pieces(p, std::string_view(text).substr(0, cut));
    const Pieces rest = pieces(p, std::string_view(text).substr(cut));
    joined.insert(joined.end(), rest.begin(), rest.end());
    ASSERT_EQ(joined, whole) << "cut at " << cut << " of a chunk of " << end;
  }
  EXPECT_EQ(p.stable_prefix("short"), 0u);
  EXPECT_THROW(p.stable_prefix(std::string(100, 'a') + "\xff" + std::string(100, 'b')),
               InvalidUtf8);
}

}  // namespace
}  // namespace kiln
