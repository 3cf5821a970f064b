#include "monitor/tui/run_layout.h"

#include <algorithm>

namespace kiln::tui {
namespace {

constexpr int kHeaderRows = 4;      // the title, the config, the progress bar, a blank row
constexpr int kShortPlotRows = 12;  // the most a plot takes in the ordinary layout
constexpr int kTallEventRows = 6;   // the fewest rows the tall layout leaves the events

}  // namespace

RunLayout run_layout(int height, size_t ranks, bool tall) {
  const int wanted = std::max(1, static_cast<int>(ranks));
  RunLayout l;
  if (!tall) {
    l.ranks_top = kHeaderRows - 1;
    l.ranks_rows = std::clamp(wanted, 1, std::max(1, height / 5));
    l.plots_top = l.ranks_top + 2 + l.ranks_rows + 1;
    l.plot_height = std::clamp((height - l.plots_top) / 2 + 1, 3, kShortPlotRows);
    l.events_top = l.plots_top + l.plot_height + 1;
    return l;
  }
  l.plots_top = kHeaderRows;
  l.plot_height = height / 2;
  l.ranks_top = l.plots_top + l.plot_height + 1;
  // Title, header and rows, a blank row, then the events.
  l.ranks_rows = std::clamp(wanted, 1, std::max(1, height - l.ranks_top - 3 - kTallEventRows));
  l.events_top = l.ranks_top + 2 + l.ranks_rows + 1;
  return l;
}

}  // namespace kiln::tui
