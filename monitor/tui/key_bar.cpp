#include "monitor/tui/key_bar.h"

#include <curses.h>

#include "monitor/tui/draw.h"

namespace kiln::tui {

void draw_key_bar(int row, const std::vector<KeyHint>& hints, const Theme& theme) {
  int col = 0;
  for (const auto& hint : hints) {
    // A hint is drawn whole or not at all, so a narrow terminal loses the last ones cleanly.
    const int need = text_width(hint.key) + 1 + text_width(hint.label) + 1;
    if (col + need > COLS) break;
    col += put(row, col, hint.key, COLS - col, theme.attr(Tone::KeyCap));
    col += put(row, col, " " + hint.label + " ", COLS - col, 0);
  }
}

void draw_message(int row, const std::vector<std::string>& lines, Tone tone, const Theme& theme) {
  for (size_t i = 0; i < lines.size(); ++i) put(row + static_cast<int>(i), 0, lines[i], COLS, theme.attr(tone));
}

}  // namespace kiln::tui
