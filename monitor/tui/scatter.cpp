#include "monitor/tui/scatter.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "monitor/tui/draw.h"

namespace kiln::tui {
namespace {

constexpr int kScatterAxisWidth = 8;  // "  2.3456" left of the grid
constexpr double kLogSpan = 20;   // x values spanning more than this ratio go on a log axis

std::string scatter_axis_value(double v) { return fmt::format("{:.4g}", v); }

bool present(const ScatterPoint& p) { return !std::isnan(p.x) && !std::isnan(p.y); }

}  // namespace

ScatterGrid scatter_grid(const std::vector<ScatterPoint>& points, int width, int height) {
  ScatterGrid grid;
  grid.rows.assign(static_cast<size_t>(std::max(0, height)), std::string(static_cast<size_t>(std::max(0, width)), ' '));
  constexpr double inf = std::numeric_limits<double>::infinity();
  grid.x_min = grid.y_min = inf;
  grid.x_max = grid.y_max = -inf;
  for (const auto& p : points) {
    if (!present(p)) continue;
    grid.x_min = std::min(grid.x_min, p.x);
    grid.x_max = std::max(grid.x_max, p.x);
    grid.y_min = std::min(grid.y_min, p.y);
    grid.y_max = std::max(grid.y_max, p.y);
  }
  if (grid.x_min > grid.x_max || width < 1 || height < 1) return grid;
  grid.log_x = grid.x_min > 0 && grid.x_max / grid.x_min > kLogSpan;
  const auto f = [&](double x) { return grid.log_x ? std::log10(x) : x; };
  // A single value sits in the middle of its axis.
  const auto fraction = [](double v, double lo, double hi) { return hi > lo ? (v - lo) / (hi - lo) : 0.5; };
  const auto cell = [](double t, int cells) { return std::clamp(static_cast<int>(std::lround(t * (cells - 1))), 0, cells - 1); };
  // Highlighted points last, so nothing covers them.
  for (const bool highlighted : {false, true})
    for (const auto& p : points) {
      if (!present(p) || p.highlight != highlighted) continue;
      const int c = cell(fraction(f(p.x), f(grid.x_min), f(grid.x_max)), width);
      const int r = height - 1 - cell(fraction(p.y, grid.y_min, grid.y_max), height);
      grid.rows[static_cast<size_t>(r)][static_cast<size_t>(c)] = highlighted ? '*' : 'o';
    }
  return grid;
}

void draw_scatter(int row, int col, int height, int width, const std::string& title,
                  const std::vector<ScatterPoint>& points, const std::string& x_label, const Theme& theme) {
  if (height < 3 || width < kScatterAxisWidth + 4) return;
  put(row, col, title, width, A_BOLD);
  const int grid_height = height - 2, grid_width = width - kScatterAxisWidth;
  const ScatterGrid grid = scatter_grid(points, grid_width, grid_height);
  if (grid.x_min > grid.x_max) {
    put(row + 1, col + kScatterAxisWidth, "no data yet", grid_width, theme.attr(Tone::Dim));
    return;
  }
  const int dim = theme.attr(Tone::Dim);
  put(row + 1, col, pad_right_aligned(scatter_axis_value(grid.y_max), kScatterAxisWidth - 1), kScatterAxisWidth - 1, dim);
  put(row + grid_height, col, pad_right_aligned(scatter_axis_value(grid.y_min), kScatterAxisWidth - 1), kScatterAxisWidth - 1, dim);
  for (int r = 0; r < grid_height; ++r) {
    put(row + 1 + r, col + kScatterAxisWidth - 1, "|", 1, dim);
    const std::string& line = grid.rows[static_cast<size_t>(r)];
    for (int c = 0; c < grid_width; ++c) {
      const char mark = line[static_cast<size_t>(c)];
      if (mark != ' ')
        put(row + 1 + r, col + kScatterAxisWidth + c, std::string(1, mark), 1,
            theme.attr(mark == '*' ? Tone::Good : Tone::Info) | (mark == '*' ? A_BOLD : 0));
    }
  }
  const int y = row + height - 1, left = col + kScatterAxisWidth;
  const std::string low = scatter_axis_value(grid.x_min), high = scatter_axis_value(grid.x_max);
  const std::string label = x_label + (grid.log_x ? " (log)" : "");
  put(y, left, low, grid_width, dim);
  put(y, left + (grid_width - text_width(label)) / 2, label, grid_width, dim);
  put(y, left + grid_width - text_width(high), high, text_width(high), dim);
}

}  // namespace kiln::tui
