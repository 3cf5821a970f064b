#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kiln {

// kiln train [--config FILE] [--set section.key=value ...] [--name NAME] [--tag TAG ...]
//            [--store PATH | --no-store] [--resume CHECKPOINT|latest] [--ranks N] [--print-config]
// command_line is the whole kiln command as typed, which the run store records.
void add_train_command(CLI::App& app, std::string command_line);

// argv as one line a shell would run again: arguments with spaces or quotes are quoted.
std::string shell_command_line(int argc, char** argv);

}  // namespace kiln
