#include "monitor/tui/experts_block.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>
#include <string>

#include "monitor/format/expert_text.h"
#include "monitor/tui/draw.h"
#include "store/expert_load.h"

namespace kiln::tui {
namespace {

// "L511 99.99" and a space: every cell one width, so the layers line up in columns.
constexpr int kCellWidth = 11;
constexpr int kIndent = 2;

int cells_per_row(int width) { return std::max(1, (width - kIndent) / kCellWidth); }

}  // namespace

int experts_block_rows(const std::vector<store::ExpertLoad>& latest, int width) {
  if (latest.empty()) return 0;
  const int per_row = cells_per_row(width);
  const int rows = (static_cast<int>(latest.size()) + per_row - 1) / per_row;
  return 1 + std::min(rows, kMaxExpertCellRows);
}

void draw_experts_block(int row, int width, const std::vector<store::ExpertLoad>& latest, const Theme& theme) {
  if (latest.empty()) return;
  put(row, 1, "experts: " + experts_summary(latest), width - 2, A_BOLD);
  const int per_row = cells_per_row(width);
  const size_t room = static_cast<size_t>(per_row * (experts_block_rows(latest, width) - 1));
  // When the layers do not all fit, the last cell counts the rest.
  const size_t shown = latest.size() <= room ? latest.size() : room - 1;
  for (size_t i = 0; i < shown; ++i) {
    const int y = row + 1 + static_cast<int>(i) / per_row;
    const int x = kIndent + static_cast<int>(i) % per_row * kCellWidth;
    put(y, x, layer_imbalance_cell(latest[i]), kCellWidth - 1,
        theme.attr(imbalance_tone(store::expert_imbalance(latest[i].tokens))));
  }
  if (shown < latest.size()) {
    const int y = row + 1 + static_cast<int>(shown) / per_row;
    const int x = kIndent + static_cast<int>(shown) % per_row * kCellWidth;
    put(y, x, fmt::format("+{} more", latest.size() - shown), kCellWidth - 1, theme.attr(Tone::Dim));
  }
}

}  // namespace kiln::tui
