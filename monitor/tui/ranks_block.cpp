#include "monitor/tui/ranks_block.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "monitor/format/figures.h"
#include "monitor/tui/draw.h"

namespace kiln::tui {
namespace {

constexpr double kNeutral = 1.05;  // within this of the median rank a step reads as even

// The row's ratio at the latest step it logged; NaN when none.
double latest_of(const std::vector<double>& relative) {
  for (auto it = relative.rbegin(); it != relative.rend(); ++it)
    if (!std::isnan(*it)) return *it;
  return store::kNoValue;
}

std::string row_label(const store::RankHeat& heat, size_t row) {
  const int first = heat.ranks[row];
  return heat.group > 1 ? fmt::format("r{}-{}", first, first + heat.group - 1) : fmt::format("r{}", first);
}

// The rows to draw, in rank order: all of them, or the slowest kMaxStripRanks at the latest step.
std::vector<size_t> shown_rows(const store::RankHeat& heat) {
  std::vector<size_t> rows(heat.ranks.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  if (rows.size() <= static_cast<size_t>(kMaxStripRanks)) return rows;
  auto slower = [&](size_t a, size_t b) {
    const double x = latest_of(heat.relative[a]), y = latest_of(heat.relative[b]);
    return std::isnan(y) ? !std::isnan(x) : x > y;
  };
  std::partial_sort(rows.begin(), rows.begin() + kMaxStripRanks, rows.end(), slower);
  rows.resize(kMaxStripRanks);
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace

int strip_columns(int width) { return std::max(1, width - kStripLabelWidth - kStripRatioWidth - 2); }

std::string heat_cells(const std::vector<double>& relative, bool unicode) {
  static const char* const kUnicode[] = {"·", "░", "▒", "▓", "█"};
  static const char* const kAscii[] = {".", "-", "+", "*", "#"};
  const char* const* shades = unicode ? kUnicode : kAscii;
  std::string cells;
  for (double r : relative) {
    if (std::isnan(r)) {
      cells += ' ';
      continue;
    }
    const int level = r <= kNeutral ? 0 : r <= 1.2 ? 1 : r <= 1.35 ? 2 : r <= 1.5 ? 3 : 4;
    cells += shades[level];
  }
  return cells;
}

int ranks_block_rows(const store::RankHeat& heat) {
  if (heat.ranks.size() < 2 || heat.steps.empty()) return 0;
  return 1 + std::min(static_cast<int>(heat.ranks.size()), kMaxStripRanks);
}

void draw_ranks_block(int row, int width, const store::RankHeat& heat, const std::vector<store::RankPlace>& places,
                      std::optional<int> slowest, const Theme& theme) {
  if (ranks_block_rows(heat) == 0) return;
  const std::vector<size_t> rows = shown_rows(heat);
  std::string who = heat.group > 1 ? "rank groups" : "ranks";
  if (rows.size() < heat.ranks.size()) who += fmt::format(", the {} slowest of {}", rows.size(), heat.ranks.size());
  put(row, 1,
      fmt::format("{}: working time / median rank's, steps {}-{} ({} even, {} slower)", who, heat.steps.front(),
                  heat.steps.back(), theme.unicode() ? "·" : ".", theme.unicode() ? "░▒▓█" : "-+*#"),
      width - 2, A_BOLD);

  std::map<int, std::string> hosts;
  for (const auto& place : places) hosts[place.rank] = place.host;
  const auto holds_slowest = [&](size_t i) {
    return slowest && *slowest >= heat.ranks[i] && *slowest < heat.ranks[i] + heat.group;
  };
  int y = row + 1;
  for (size_t i : rows) {
    const auto host = hosts.find(heat.ranks[i]);
    const std::string label = pad_left_aligned(row_label(heat, i), 6) +
                              pad_left_aligned(clip(host == hosts.end() ? "" : host->second, 10), 11);
    const double latest = latest_of(heat.relative[i]);
    const std::string ratio = std::isnan(latest) ? kAbsent : fmt::format("{:.2f}x", latest);
    const int attr = theme.attr(holds_slowest(i) ? Tone::Bad : Tone::Plain);
    int col = put(y, 1, label, kStripLabelWidth, attr);
    col += put(y, 1 + col, heat_cells(heat.relative[i], theme.unicode()), width - 2 - col - kStripRatioWidth, attr);
    put(y, 1 + col, pad_right_aligned(ratio, kStripRatioWidth), kStripRatioWidth, attr);
    ++y;
  }
}

}  // namespace kiln::tui
