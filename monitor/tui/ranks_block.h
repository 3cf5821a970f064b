// The run screen's heat strip, the terminal's straggler view: a line per rank over the recent
// logged steps, each step one shade character by the rank's working time (forward, backward,
// optimizer) over the median rank's at that step, then the rank's ratio at the latest step:
//
//   r3 gpu-b        ········▒▓████████  1.50x
//
// A world of more ranks than kMaxStripRanks shows its slowest at the latest step.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "monitor/tui/theme.h"
#include "store/rank_queries.h"
#include "store/types.h"

namespace kiln::tui {

inline constexpr int kMaxStripRanks = 8;
// The rank and host before the strip, and the ratio after it.
inline constexpr int kStripLabelWidth = 17;
inline constexpr int kStripRatioWidth = 8;

// The columns a strip has room for at `width`: the steps to ask rank_heat for.
int strip_columns(int width);

// One cell per step: '·' at or below 1.05x the median rank, then '░', '▒', '▓' up to 1.2x,
// 1.35x and 1.5x, and '█' above; a space where the rank logged nothing. In ASCII the shades
// are ". - + * #".
std::string heat_cells(const std::vector<double>& relative, bool unicode);

// The rows the block takes, its title included: 0 with fewer than two ranks.
int ranks_block_rows(const store::RankHeat& heat);

// Draws the block from `row`, `width` columns wide; `places` name each rank's host. The line
// holding `slowest` (the rank store::slowest_of names at the latest step, as the ranks table
// highlights it) is drawn in the bad tone.
void draw_ranks_block(int row, int width, const store::RankHeat& heat, const std::vector<store::RankPlace>& places,
                      std::optional<int> slowest, const Theme& theme);

}  // namespace kiln::tui
