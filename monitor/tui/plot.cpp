#include "monitor/tui/plot.h"

#include <curses.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/core.h>
#include <limits>
#include <optional>

#include "monitor/tui/draw.h"

namespace kiln::tui {
namespace {

constexpr int kAxisWidth = 8;  // "  2.3456" left of the plot
constexpr int kMiddleLabelRows = 7;  // a plot this tall has room for a middle y value

// Bit of the braille dot at column dx (0..1), row dy (0..3) of a cell (Unicode's order).
constexpr int kDotBit[4][2] = {{0x01, 0x08}, {0x02, 0x10}, {0x04, 0x20}, {0x40, 0x80}};

std::string braille_char(int bits) {
  const int code = 0x2800 + bits;  // three UTF-8 bytes: 1110xxxx 10xxxxxx 10xxxxxx
  std::string out;
  out += static_cast<char>(0xE0 | (code >> 12));
  out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
  out += static_cast<char>(0x80 | (code & 0x3F));
  return out;
}

std::string axis_value(double v) {
  if (std::fabs(v) >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (std::fabs(v) >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  if (std::fabs(v) >= 100) return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

}  // namespace

PlotRange range_of(const std::vector<PlotSeries>& series) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  PlotRange r{inf, -inf, inf, -inf};
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (std::isnan(s.y[i])) continue;
      r.x_min = std::min(r.x_min, s.x[i]);
      r.x_max = std::max(r.x_max, s.x[i]);
      r.y_min = std::min(r.y_min, s.y[i]);
      r.y_max = std::max(r.y_max, s.y[i]);
    }
  if (r.x_min > r.x_max) return PlotRange{};
  // A flat line or a single point still gets a box to sit in.
  if (r.x_max == r.x_min) r.x_max = r.x_min + 1;
  if (r.y_max == r.y_min) {
    const double pad = std::max(std::fabs(r.y_min) * 0.05, 1e-9);
    r.y_min -= pad;
    r.y_max += pad;
  }
  return r;
}

PlotRaster rasterize(const std::vector<PlotSeries>& series, const PlotRange& range, int width,
                     int height, bool braille) {
  const int dots_x = width * 2, dots_y = height * 4;
  std::vector<std::vector<int>> bits(static_cast<size_t>(height), std::vector<int>(width, 0));
  PlotRaster out;
  out.owner.assign(static_cast<size_t>(height), std::vector<int>(static_cast<size_t>(width), -1));
  const auto to_dot = [&](double x, double y) {
    const double fx = (x - range.x_min) / (range.x_max - range.x_min);
    const double fy = (y - range.y_min) / (range.y_max - range.y_min);
    const int dx = std::clamp(static_cast<int>(std::lround(fx * (dots_x - 1))), 0, dots_x - 1);
    const int dy = std::clamp(static_cast<int>(std::lround((1 - fy) * (dots_y - 1))), 0, dots_y - 1);
    return std::pair{dx, dy};
  };
  const auto set_dot = [&](int dx, int dy, int owner) {
    const size_t r = static_cast<size_t>(dy / 4), c = static_cast<size_t>(dx / 2);
    bits[r][c] |= kDotBit[dy % 4][dx % 2];
    out.owner[r][c] = owner;
  };
  for (size_t s = 0; s < series.size(); ++s) {
    std::optional<std::pair<int, int>> previous;
    for (size_t i = 0; i < series[s].x.size(); ++i) {
      if (std::isnan(series[s].y[i])) continue;
      const auto [x1, y1] = to_dot(series[s].x[i], series[s].y[i]);
      // Joins consecutive points with a straight line of dots (Bresenham).
      int x0 = previous ? previous->first : x1, y0 = previous ? previous->second : y1;
      const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
      const int ddx = std::abs(x1 - x0), ddy = -std::abs(y1 - y0);
      int err = ddx + ddy;
      while (true) {
        set_dot(x0, y0, static_cast<int>(s));
        if (x0 == x1 && y0 == y1) break;
        const int e2 = 2 * err;
        if (e2 >= ddy) { err += ddy; x0 += sx; }
        if (e2 <= ddx) { err += ddx; y0 += sy; }
      }
      previous = std::pair{x1, y1};
    }
  }
  for (const auto& row : bits) {
    std::string line;
    for (int b : row) {
      if (braille) line += b ? braille_char(b) : " ";
      else line += b ? '*' : ' ';
    }
    out.rows.push_back(std::move(line));
  }
  return out;
}

std::vector<PlotSeries> log_scaled(const std::vector<PlotSeries>& series) {
  std::vector<PlotSeries> scaled = series;
  for (auto& s : scaled)
    for (double& y : s.y) y = y > 0 ? std::log10(y) : std::numeric_limits<double>::quiet_NaN();
  return scaled;
}

void draw_plot(int row, int col, int height, int width, const std::string& title,
               const std::vector<PlotSeries>& series, const Theme& theme, const PlotAxes& axes) {
  const int axis_rows = axes.x_label.empty() ? 0 : 1;
  if (height < 2 + axis_rows || width < kAxisWidth + 4) return;
  put(row, col, title, width, A_BOLD);
  const int plot_height = height - 1 - axis_rows, plot_width = width - kAxisWidth;
  const std::vector<PlotSeries> scaled = axes.log_y ? log_scaled(series) : series;
  const bool any = std::any_of(scaled.begin(), scaled.end(), [](const PlotSeries& s) {
    return std::any_of(s.y.begin(), s.y.end(), [](double v) { return !std::isnan(v); });
  });
  if (!any) {
    put(row + 1, col + kAxisWidth, "no data yet", plot_width, theme.attr(Tone::Dim));
    return;
  }
  const PlotRange range = range_of(scaled);
  const int dim = theme.attr(Tone::Dim);
  // The y axis reads in the data's units on either scale.
  const auto label_y = [&](int r, double v) {
    put(row + 1 + r, col, pad_right_aligned(axis_value(axes.log_y ? std::pow(10.0, v) : v), kAxisWidth - 1),
        kAxisWidth - 1, dim);
  };
  label_y(0, range.y_max);
  if (plot_height >= kMiddleLabelRows) {
    // The value at the centre of the middle row's four dots.
    const int r = (plot_height - 1) / 2;
    const double from_top = (4.0 * r + 1.5) / (4.0 * plot_height - 1);
    label_y(r, range.y_max - from_top * (range.y_max - range.y_min));
  }
  label_y(plot_height - 1, range.y_min);
  if (axis_rows) {
    const int y = row + height - 1, left = col + kAxisWidth;
    const std::string low = axis_value(range.x_min), high = axis_value(range.x_max);
    put(y, left, low, plot_width, dim);
    put(y, left + (plot_width - text_width(axes.x_label)) / 2, axes.x_label, plot_width, dim);
    put(y, left + plot_width - text_width(high), high, text_width(high), dim);
  }
  const PlotRaster raster = rasterize(scaled, range, plot_width, plot_height, theme.unicode());
  for (int r = 0; r < plot_height; ++r) {
    // Cell by cell, so each takes the tone of the series that drew it.
    const std::string& line = raster.rows[static_cast<size_t>(r)];
    size_t byte = 0;
    for (int c = 0; c < plot_width; ++c) {
      const size_t length = theme.unicode() && static_cast<unsigned char>(line[byte]) >= 0x80 ? 3 : 1;
      const int owner = raster.owner[static_cast<size_t>(r)][static_cast<size_t>(c)];
      if (owner >= 0)
        put(row + 1 + r, col + kAxisWidth + c, std::string_view(line).substr(byte, length), 1,
            theme.attr(series[static_cast<size_t>(owner)].tone));
      byte += length;
    }
  }
}

}  // namespace kiln::tui
