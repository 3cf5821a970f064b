#include "monitor/tui/help_overlay.h"

#include <curses.h>

#include <algorithm>

#include "monitor/tui/draw.h"

namespace kiln::tui {

std::vector<KeyHint> global_keys() {
  return {{"?", "this help (any key closes it)"},
          {"q Esc", "back to the previous screen; quit from the runs list"},
          {"Up Down j k", "move; PgUp PgDn g G page, first, last"},
          {"Ctrl-C", "quit at once (the terminal is restored)"}};
}

void draw_help(const std::string& title, const std::vector<KeyHint>& keys, const Theme& theme) {
  std::vector<KeyHint> all = keys;
  all.push_back({"", ""});
  for (auto& k : global_keys()) all.push_back(k);
  int key_width = 0, text_width_max = 0;
  for (const auto& k : all) {
    key_width = std::max(key_width, text_width(k.key));
    text_width_max = std::max(text_width_max, text_width(k.label));
  }
  const int width = std::min(COLS - 2, key_width + text_width_max + 6);
  const int height = std::min(LINES - 2, static_cast<int>(all.size()) + 4);
  const int top = std::max(0, (LINES - height) / 2), left = std::max(0, (COLS - width) / 2);
  for (int r = 0; r < height; ++r) fill_row(top + r, left, width, 0);
  attron(theme.attr(Tone::Info));
  mvhline(top, left, '-', width);
  mvhline(top + height - 1, left, '-', width);
  mvvline(top, left, '|', height);
  mvvline(top, left + width - 1, '|', height);
  for (const int row : {top, top + height - 1})
    for (const int col : {left, left + width - 1}) mvaddch(row, col, '+');
  attroff(theme.attr(Tone::Info));
  put(top, left + 2, " " + title + " keys ", width - 4, theme.attr(Tone::Title));
  for (size_t i = 0; i < all.size() && static_cast<int>(i) + 2 < height - 1; ++i) {
    const int row = top + 2 + static_cast<int>(i);
    put(row, left + 2, pad_left_aligned(all[i].key, key_width), key_width, theme.attr(Tone::Accent));
    put(row, left + 4 + key_width, all[i].label, width - key_width - 6, 0);
  }
}

}  // namespace kiln::tui
