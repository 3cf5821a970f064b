#include "monitor/tui/draw.h"

#include <gtest/gtest.h>

namespace kiln::tui {
namespace {

TEST(Draw, TextIsCutAndPaddedByColumnsNotBytes) {
  EXPECT_EQ(text_width("\u2801\u2802x"), 3);
  EXPECT_EQ(clip("\u2801\u2802x", 2), "\u2801\u2802");
  EXPECT_EQ(pad_left_aligned("ab", 4), "ab  ");
  EXPECT_EQ(pad_right_aligned("ab", 4), "  ab");
  EXPECT_EQ(pad_right_aligned("abcdef", 3), "abc");
}

}  // namespace
}  // namespace kiln::tui
