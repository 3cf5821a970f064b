#include "base/terminal_text.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(TerminalText, ControlCharactersBecomeVisibleEscapes) {
  // An OSC that retitles the window, a colour, BEL and NUL: none reaches the terminal raw.
  const std::string hostile = std::string("a\x1b]0;owned\x07") + "\x1b[31mred" + std::string(1, '\0') + "z\x7f";
  EXPECT_EQ(terminal_line(hostile), "a\\x1b]0;owned\\x07\\x1b[31mred\\x00z\\x7f");
  EXPECT_EQ(terminal_line("two\nlines\tand\rback"), "two\\nlines\\tand\\rback");
  // C1's CSI (U+009B) starts a sequence on some terminals as ESC [ does.
  EXPECT_EQ(terminal_line("\xc2\x9b" "31m"), "\\u009b31m");
}

TEST(TerminalText, PrintableTextAndOtherUnicodeAreKept) {
  EXPECT_EQ(terminal_line("plain ASCII ~!"), "plain ASCII ~!");
  EXPECT_EQ(terminal_line("caf\xc3\xa9 \xe2\x86\x92 \xc2\xa0nbsp"), "caf\xc3\xa9 \xe2\x86\x92 \xc2\xa0nbsp");
  EXPECT_EQ(terminal_line("\xff\xc2"), "\xff\xc2");  // ill-formed bytes: not controls, kept
}

TEST(TerminalText, ABlockKeepsItsLineBreaksAndTabs) {
  EXPECT_EQ(terminal_block("In the beginning\n\tGod\x1b[2J"), "In the beginning\n\tGod\\x1b[2J");
  EXPECT_EQ(terminal_block("\r"), "\\r");
}

}  // namespace
}  // namespace kiln
