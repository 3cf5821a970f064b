// Scatter plots in the terminal: one character per point ('o', '*' for the highlighted one,
// drawn over any other in its cell), on an x axis that turns logarithmic when its values
// span more than 20x, as the dashboard's sweep page does. The sweep screen plots each
// point's loss against one swept parameter with it.
#pragma once

#include <string>
#include <vector>

#include "monitor/tui/theme.h"

namespace kiln::tui {

struct ScatterPoint {
  double x = 0, y = 0;  // NaN in either: left out
  bool highlight = false;
};

struct ScatterGrid {
  std::vector<std::string> rows;  // height strings of width characters
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
  bool log_x = false;
};

// The points on a width x height grid of characters, the lowest y on the bottom row.
ScatterGrid scatter_grid(const std::vector<ScatterPoint>& points, int width, int height);

// A titled scatter at (row, col) of height x width cells: the title, the y range's ends on
// the left, the grid, and below it the x range's ends around x_label. No points: "no data yet".
void draw_scatter(int row, int col, int height, int width, const std::string& title,
                  const std::vector<ScatterPoint>& points, const std::string& x_label, const Theme& theme);

}  // namespace kiln::tui
