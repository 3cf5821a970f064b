#pragma once

#include <CLI/CLI.hpp>

namespace kiln {

// kiln train [--config FILE] [--set section.key=value ...] [--print-config]
void add_train_command(CLI::App& app);

}  // namespace kiln
