// The `?` overlay: a box over the current screen listing its keys and the global ones.
#pragma once

#include <string>
#include <vector>

#include "monitor/tui/key_bar.h"
#include "monitor/tui/theme.h"

namespace kiln::tui {

// The keys every screen shares.
std::vector<KeyHint> global_keys();

void draw_help(const std::string& title, const std::vector<KeyHint>& keys, const Theme& theme);

}  // namespace kiln::tui
