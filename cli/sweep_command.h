#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "store/database.h"

namespace kiln {

// kiln sweep [--config FILE] --grid KEY=V1,V2|KEY=lo..hi|KEY=log:lo..hi ... [--random N [--seed S]]
//            [--parallel K] [--ranks R] [--name NAME] [--set KEY=VALUE ...] [--tag TAG ...]
//            [--store PATH]
// kiln sweep --resume SWEEP [--retry-failed] [--parallel K] [--store PATH]
// kiln sweep list [--json] | kiln sweep show SWEEP [--json]
// command_line is the whole kiln command as typed, which the store records.
void add_sweep_command(CLI::App& app, std::string command_line);

// kiln sweep list and kiln sweep show (cli/sweep_show.cpp).
void add_sweep_view_commands(CLI::App& sweep);
// The points table of kiln sweep show, which kiln sweep also prints when it is done.
void print_sweep_points(store::Database& db, int64_t sweep_id);

}  // namespace kiln
