// The compare screen: runs marked on the runs screen side by side, a summary table (final
// and best loss, best validation loss, mean tokens/s and MFU, elapsed time), the config keys
// whose values differ, and their loss curves overlaid on one plot, each run in its own
// colour, on a linear or log scale (l).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "monitor/tui/screen.h"

namespace kiln::tui {

std::unique_ptr<Screen> make_compare_screen(std::vector<int64_t> run_ids);

}  // namespace kiln::tui
