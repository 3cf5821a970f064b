// kiln runs resume (of a run that has ended) and kiln runs fork: `kiln train --resume` again
// from one of a run's checkpoints, in the folder the run was started in, as as many ranks as
// it ran (under mpirun), with its recorded command line's other options (docs/runs.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct RelaunchOptions {
  std::string store;                   // --store, as given
  std::string run;                     // id, name or prefix
  std::vector<std::string> overrides;  // --set key=value, on top of the checkpoint's config
  int ranks = 0;                       // processes to run as; 0: as many as the run had
  bool detach = false;                 // start in the background, output to a log file
  std::optional<int64_t> fork_step;    // a fork: from the checkpoint at or before this step
  std::string fork_name;               // and under this name (default RUN-fork-STEP)
};

// Continues a released, stopped, failed, lost or completed run from its newest checkpoint
// as the same run. Replaces this process with the training one unless options.detach.
void relaunch_run(const RelaunchOptions& options);

// kiln runs fork RUN --step N [--set key=value ...] [--name NAME] [--ranks N] [--detach]
void add_runs_fork_command(CLI::App& runs);

// The --resume, --detach and --ranks options `kiln runs resume` adds for an ended run.
void add_relaunch_options(CLI::App* command, RelaunchOptions& options);

}  // namespace kiln
