#include "cli/runs_command.h"

namespace kiln {

void add_runs_command(CLI::App& app) {
  CLI::App* runs = app.add_subcommand(
      "runs", "Query, compare, export, edit and steer the runs recorded in the run store");
  runs->require_subcommand(1);
  add_runs_list_command(*runs);
  add_runs_show_command(*runs);
  add_runs_compare_command(*runs);
  add_runs_export_command(*runs);
  add_runs_import_command(*runs);
  add_runs_edit_commands(*runs);
  add_runs_steer_commands(*runs);
  add_runs_recover_command(*runs);
}

}  // namespace kiln
