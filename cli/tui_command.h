#pragma once

#include <CLI/CLI.hpp>

namespace kiln {

// kiln tui [--store PATH] [--mono]: the terminal dashboard (docs/tui.md).
void add_tui_command(CLI::App& app);

}  // namespace kiln
