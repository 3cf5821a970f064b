// Where the run screen's parts go. A terminal of ordinary height puts the ranks table first
// and keeps the plots short; a tall one gives the plots half its rows and puts the ranks
// table below them, where many ranks can take the rows they need, then the events. A run
// with mixture-of-experts layers has its experts block (experts_block.h) above the events.
#pragma once

#include <cstddef>

namespace kiln::tui {

// Terminals from this many rows get the tall layout. It is chosen by the terminal's rows,
// not the screen's, so a message wrapping over the bottom rows does not rearrange it.
inline constexpr int kTallTerminalRows = 40;

struct RunLayout {
  int ranks_top = 0;    // the ranks' title row; the table's header is the row below
  int ranks_rows = 0;   // table rows, header not counted
  int plots_top = 0;    // the plots' title row
  int plot_height = 0;  // rows, title included
  int experts_top = 0;  // the experts block's first row, when it has rows
  int events_top = 0;   // the events' title row; they take the rows to the bottom
};

// For a screen of `height` rows (the bottom rows excluded) showing `ranks` ranks and an
// experts block of `expert_rows` rows (0: none).
RunLayout run_layout(int height, size_t ranks, bool tall, int expert_rows = 0);

}  // namespace kiln::tui
