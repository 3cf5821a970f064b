// The run screen's experts block, for a run with mixture-of-experts layers: a title with the
// worst layer's imbalance and the aux loss (format/expert_text.h), then each layer's latest
// imbalance as a coloured cell, "L3 1.84", as many to a row as the width holds.
#pragma once

#include <vector>

#include "monitor/tui/theme.h"
#include "store/types.h"

namespace kiln::tui {

// At most this many rows of cells; past them the last cell says how many layers are left out.
inline constexpr int kMaxExpertCellRows = 3;

// The rows the block takes at `width` columns, its title included: 0 for a run without
// expert loads (the screen then has no block at all).
int experts_block_rows(const std::vector<store::ExpertLoad>& latest, int width);

// Draws the block from `row`, `width` columns wide; `latest` is each layer's latest load.
void draw_experts_block(int row, int width, const std::vector<store::ExpertLoad>& latest, const Theme& theme);

}  // namespace kiln::tui
