#include "monitor/tui/draw.h"

#include <gtest/gtest.h>

#include "monitor/tui/key_bar.h"
#include "monitor/tui/test_screen.h"

namespace kiln::tui {
namespace {

using Lines = std::vector<std::string>;

TEST(Draw, TextIsCutAndPaddedByColumnsNotBytes) {
  EXPECT_EQ(text_width("\u2801\u2802x"), 3);
  EXPECT_EQ(clip("\u2801\u2802x", 2), "\u2801\u2802");
  EXPECT_EQ(pad_left_aligned("ab", 4), "ab  ");
  EXPECT_EQ(pad_right_aligned("ab", 4), "  ab");
  EXPECT_EQ(pad_right_aligned("abcdef", 3), "abc");
}

TEST(Draw, TextWrapsAtSpacesAndCutsAWordLongerThanALine) {
  EXPECT_EQ(wrap("stop run beta (it checkpoints if configured)", 20),
            (Lines{"stop run beta (it", "checkpoints if", "configured)"}));
  EXPECT_EQ(wrap("  spaces   between  ", 20), (Lines{"spaces between"}));
  EXPECT_EQ(wrap("see /a/very/long/path/to/train.log", 10),
            (Lines{"see", "/a/very/lo", "ng/path/to", "/train.log"}));
  EXPECT_EQ(wrap("\u2801\u2802\u2803\u2804 x", 3), (Lines{"\u2801\u2802\u2803", "\u2804 x"}));
  EXPECT_EQ(wrap("", 10), Lines{});
}

TEST(Draw, PutStopsAtTheRightEdge) {
  TestScreen screen(10, 2);
  EXPECT_EQ(put(0, 6, "abcdefgh", 20), 4);
  EXPECT_EQ(screen.row(0), "      abcd");
}

TEST(Draw, AMessageLongerThanTheTerminalTakesMoreRows) {
  TestScreen screen(40, 4);
  const std::string message =
      "K kills only a run launched from this kiln tui and still running; s stops any live run";
  draw_message(1, wrap(message, COLS), Tone::Warn, Theme(false));
  EXPECT_EQ(screen.text(), "\n"
                           "K kills only a run launched from this\n"
                           "kiln tui and still running; s stops any\n"
                           "live run\n");
}

}  // namespace
}  // namespace kiln::tui
