// The bottom of the screen: the keys of the current screen in one row, htop-style
// ("Enter Open  / Filter ..."), or a message (a command queued, an error) while one is
// fresh, wrapped over as many rows as it needs.
#pragma once

#include <string>
#include <vector>

#include "monitor/tui/theme.h"

namespace kiln::tui {

struct KeyHint {
  std::string key;    // as the user presses it: "Enter", "/", "p"
  std::string label;  // what it does, one or two words
};

void draw_key_bar(int row, const std::vector<KeyHint>& hints, const Theme& theme);
// A message's rows (wrap() to the terminal's width), from `row` down.
void draw_message(int row, const std::vector<std::string>& lines, Tone tone, const Theme& theme);

}  // namespace kiln::tui
