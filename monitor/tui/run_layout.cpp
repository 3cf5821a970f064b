#include "monitor/tui/run_layout.h"

#include <algorithm>

namespace kiln::tui {
namespace {

constexpr int kHeaderRows = 5;      // the title, the config, the progress bar, the plan, a blank row
constexpr int kShortPlotRows = 12;  // the most a plot takes in the ordinary layout
constexpr int kTallEventRows = 6;   // the fewest rows the tall layout leaves the events

}  // namespace

RunLayout run_layout(int height, size_t ranks, bool tall, int expert_rows) {
  const int wanted = std::max(1, static_cast<int>(ranks));
  // The block and the blank row after it.
  const int block = expert_rows > 0 ? expert_rows + 1 : 0;
  RunLayout l;
  if (!tall) {
    l.ranks_top = kHeaderRows - 1;
    l.ranks_rows = std::clamp(wanted, 1, std::max(1, height / 5));
    l.plots_top = l.ranks_top + 2 + l.ranks_rows + 1;
    l.plot_height = std::clamp((height - l.plots_top - block) / 2 + 1, 3, kShortPlotRows);
    l.experts_top = l.plots_top + l.plot_height + 1;
    l.events_top = l.experts_top + block;
    return l;
  }
  l.plots_top = kHeaderRows;
  l.plot_height = height / 2;
  l.ranks_top = l.plots_top + l.plot_height + 1;
  // Title, header and rows, a blank row, the experts block, then the events.
  l.ranks_rows = std::clamp(wanted, 1, std::max(1, height - l.ranks_top - 3 - block - kTallEventRows));
  l.experts_top = l.ranks_top + 2 + l.ranks_rows + 1;
  l.events_top = l.experts_top + block;
  return l;
}

}  // namespace kiln::tui
