#include "monitor/tui/plot.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln::tui {
namespace {

TEST(Plot, RangeCoversEverySeriesAndSkipsMissingValues) {
  const PlotRange r = range_of({{{1, 2, 3}, {5, NAN, 1}, Tone::Good}, {{10}, {3}, Tone::Info}});
  EXPECT_EQ(r.x_min, 1);
  EXPECT_EQ(r.x_max, 10);
  EXPECT_EQ(r.y_min, 1);
  EXPECT_EQ(r.y_max, 5);
}

TEST(Plot, AFlatLineGetsABoxAroundIt) {
  const PlotRange r = range_of({{{4}, {2}, Tone::Good}});
  EXPECT_EQ(r.x_min, 4);
  EXPECT_EQ(r.x_max, 5);
  EXPECT_LT(r.y_min, 2);
  EXPECT_GT(r.y_max, 2);
}

TEST(Plot, ASeriesFallingCornerToCornerFillsTheDiagonalInAscii) {
  // 3 cells square: 6 x 12 dots; from top left to bottom right every cell on the diagonal
  // gets dots, and the line is joined.
  const PlotSeries falling{{0, 1}, {1, 0}, Tone::Good};
  const PlotRaster raster = rasterize({falling}, PlotRange{0, 1, 0, 1}, 3, 3, false);
  ASSERT_EQ(raster.rows.size(), 3u);
  EXPECT_EQ(raster.rows[0], "*  ");
  EXPECT_EQ(raster.rows[1], " * ");
  EXPECT_EQ(raster.rows[2], "  *");
  EXPECT_EQ(raster.owner[1][1], 0);
  EXPECT_EQ(raster.owner[0][2], -1);
}

TEST(Plot, BrailleDotsFollowUnicodesOrder) {
  // One cell, 2 x 4 dots: a point at the top left is dot 1 (U+2801), at the bottom right dot 8
  // (U+2880); both in one cell combine (U+2881).
  const PlotRange box{0, 1, 0, 1};
  EXPECT_EQ(rasterize({{{0}, {1}, Tone::Good}}, box, 1, 1, true).rows[0], "\u2801");
  EXPECT_EQ(rasterize({{{1}, {0}, Tone::Good}}, box, 1, 1, true).rows[0], "\u2880");
  EXPECT_EQ(rasterize({{{0}, {1}, Tone::Good}, {{1}, {0}, Tone::Info}}, box, 1, 1, true).rows[0],
            "\u2881");
}

TEST(Plot, TheSeriesDrawnLastOwnsASharedCell) {
  const PlotRange box{0, 1, 0, 1};
  const PlotRaster raster = rasterize({{{0}, {1}, Tone::Good}, {{1}, {0}, Tone::Info}}, box, 1, 1, true);
  EXPECT_EQ(raster.owner[0][0], 1);
}

}  // namespace
}  // namespace kiln::tui
