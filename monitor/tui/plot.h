// Line plots in the terminal. With a UTF-8 locale each character cell holds a 2x4 grid of
// braille dots, so a 40-column plot draws 80 points across; without one, '*' marks cells.
// Several series overlay on one set of axes, each in its own tone.
#pragma once

#include <string>
#include <vector>

#include "monitor/tui/theme.h"

namespace kiln::tui {

struct PlotSeries {
  std::vector<double> x;  // e.g. steps, increasing
  std::vector<double> y;  // same length; NaN points are skipped
  Tone tone = Tone::Good;
};

// The characters of a plot area of width x height cells, one string per row (UTF-8), and
// which series drew last in each cell (-1: none), for colouring.
struct PlotRaster {
  std::vector<std::string> rows;
  std::vector<std::vector<int>> owner;
};

// Scales all series to one box: x over [x_min, x_max], y over [y_min, y_max].
struct PlotRange {
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
};
PlotRange range_of(const std::vector<PlotSeries>& series);

PlotRaster rasterize(const std::vector<PlotSeries>& series, const PlotRange& range, int width,
                     int height, bool braille);

// The series with y on a log10 scale; points at or below 0, which have no logarithm, are
// left out (NaN).
std::vector<PlotSeries> log_scaled(const std::vector<PlotSeries>& series);

struct PlotAxes {
  // Named under the plot between the x range's ends ("0  step  6000"); empty: no x axis row.
  std::string x_label;
  // y on a log10 scale; the axis still reads in the data's units.
  bool log_y = false;
};

// A titled plot at (row, col) of height x width cells: the title on the first row, the
// y-axis' top, middle (when there is room) and bottom values on the left, the raster to
// their right, and the x axis below when it has a label. Empty series draw "no data yet".
void draw_plot(int row, int col, int height, int width, const std::string& title,
               const std::vector<PlotSeries>& series, const Theme& theme,
               const PlotAxes& axes = {});

}  // namespace kiln::tui
