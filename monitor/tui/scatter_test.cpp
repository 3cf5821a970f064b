#include "monitor/tui/scatter.h"

#include <gtest/gtest.h>

#include <cmath>

#include "monitor/tui/test_screen.h"

namespace kiln::tui {
namespace {

TEST(ScatterGrid, PlacesEachPointAndTheHighlightedOneOnTop) {
  // x 1..3 linear over 5 columns, y 0..2 over 3 rows; (2, 1) twice, one highlighted.
  const auto grid = scatter_grid({{1, 0}, {3, 2}, {2, 1}, {2, 1, true}, {NAN, 5}}, 5, 3);
  ASSERT_EQ(grid.rows.size(), 3u);
  EXPECT_EQ(grid.rows[0], "    o");
  EXPECT_EQ(grid.rows[1], "  *  ");
  EXPECT_EQ(grid.rows[2], "o    ");
  EXPECT_FALSE(grid.log_x);
  EXPECT_DOUBLE_EQ(grid.x_min, 1);
  EXPECT_DOUBLE_EQ(grid.y_max, 2);
}

TEST(ScatterGrid, XSpanningMoreThanTwentyTimesIsLogarithmic) {
  // 1e-4, 1e-3, 1e-2 evenly spaced on a log axis of 5 columns.
  const auto grid = scatter_grid({{1e-4, 1}, {1e-3, 1}, {1e-2, 1}}, 5, 1);
  EXPECT_TRUE(grid.log_x);
  EXPECT_EQ(grid.rows[0], "o o o");
  EXPECT_FALSE(scatter_grid({{1, 1}, {20, 1}}, 5, 1).log_x) << "20x is not more than 20x";
  EXPECT_FALSE(scatter_grid({{0, 1}, {100, 1}}, 5, 1).log_x) << "zero has no logarithm";
}

TEST(DrawScatter, LabelsBothAxesAroundTheGrid) {
  TestScreen screen(40, 6);
  draw_scatter(0, 0, 6, 40, "final loss by train.lr", {{1e-4, 2.5}, {1e-2, 2.1, true}}, "train.lr", Theme(false));
  EXPECT_EQ(screen.row(0), "final loss by train.lr");
  EXPECT_EQ(screen.row(1), "    2.5|o");
  EXPECT_EQ(screen.row(4), "    2.1|                               *");
  EXPECT_EQ(screen.row(5), "        0.0001   train.lr (log)     0.01");
  TestScreen empty(40, 4);
  draw_scatter(0, 0, 4, 40, "t", {}, "x", Theme(false));
  EXPECT_EQ(empty.row(1), "        no data yet");
}

}  // namespace
}  // namespace kiln::tui
