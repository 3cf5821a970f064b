#pragma once

#include <CLI/CLI.hpp>

namespace kiln {

// kiln runs list | show | compare | export     read run history (docs/runs.md)
// kiln runs import                             bring in a run another tool logged
// kiln runs tag | note | rm                     edit a run's record
// kiln runs pause | resume | stop | checkpoint | set   steer a live run
// kiln runs recover                             load what a run's store could not take
void add_runs_command(CLI::App& app);

// Each group registers its subcommands under `kiln runs`.
void add_runs_list_command(CLI::App& runs);
void add_runs_show_command(CLI::App& runs);
void add_runs_compare_command(CLI::App& runs);
void add_runs_export_command(CLI::App& runs);
void add_runs_import_command(CLI::App& runs);
void add_runs_edit_commands(CLI::App& runs);
void add_runs_steer_commands(CLI::App& runs);
void add_runs_recover_command(CLI::App& runs);

}  // namespace kiln
