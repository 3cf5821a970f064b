#include "monitor/tui/plot.h"

#include <gtest/gtest.h>

#include <cmath>

#include "monitor/tui/test_screen.h"

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

TEST(Plot, ALogScaleTakesLogarithmsAndLeavesOutWhatHasNone) {
  const std::vector<PlotSeries> scaled = log_scaled({{{1, 2, 3, 4}, {1, 100, 0, -1}, Tone::Good}});
  EXPECT_EQ(scaled[0].y[0], 0);
  EXPECT_EQ(scaled[0].y[1], 2);
  EXPECT_TRUE(std::isnan(scaled[0].y[2]));
  EXPECT_TRUE(std::isnan(scaled[0].y[3]));
}

TEST(Plot, TheXAxisShowsItsEndsAndNameUnderThePlot) {
  TestScreen screen(40, 8);
  draw_plot(0, 0, 8, 40, "loss by step", {{{0, 500, 1000}, {3, 2, 1}, Tone::Good}}, Theme(false),
            PlotAxes{"step", false});
  EXPECT_EQ(screen.row(0), "loss by step");
  EXPECT_EQ(screen.row(1).substr(0, 8), "      3 ");
  EXPECT_EQ(screen.row(6).substr(0, 8), "      1 ");
  EXPECT_EQ(screen.row(7), "        0             step          1000");
}

TEST(Plot, OnALogScaleEqualRatiosAreEqualStepsAndTheAxisReadsInTheDataUnits) {
  // From 1000 down to 1 in three steps of x: cells 0, 10, 21 and 31 of 32 across.
  const std::vector<PlotSeries> falling = {{{0, 1, 2, 3}, {1000, 100, 10, 1}, Tone::Good}};
  TestScreen screen(40, 9);
  draw_plot(0, 0, 9, 40, "loss", falling, Theme(false), PlotAxes{"step", true});
  EXPECT_EQ(screen.row(1).substr(0, 8), "   1000 ");
  EXPECT_EQ(screen.row(4).substr(0, 8), "  31.62 ");  // the geometric middle
  EXPECT_EQ(screen.row(7).substr(0, 8), "      1 ");
  // 100 is a third of the way down (plot row 2 of 7); linear would put it at the bottom.
  EXPECT_NE(screen.cell(1 + 2, 8 + 10), " ");
  EXPECT_EQ(screen.cell(1 + 6, 8 + 10), " ");

  erase();
  draw_plot(0, 0, 9, 40, "loss", falling, Theme(false), PlotAxes{"step", false});
  EXPECT_EQ(screen.row(4).substr(0, 8), "    500 ");
  EXPECT_EQ(screen.cell(1 + 2, 8 + 10), " ");
  EXPECT_NE(screen.cell(1 + 6, 8 + 10), " ");
}

}  // namespace
}  // namespace kiln::tui
