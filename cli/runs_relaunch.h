// kiln runs resume (of a run that has ended, or whose process was killed) and kiln runs fork:
// their options, the dashboard's words (its launch record checked as `kiln train --serve`
// checks what is typed, and the token given again), and the lines they print. The launch
// itself, rebuilt from the store's fields and never from the run's command line's text, is
// launch/relaunch.h's (docs/runs.md, docs/security.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/server_token.h"

namespace kiln {

struct RelaunchOptions {
  std::string store;                   // --store, as given
  std::string run;                     // id, name or prefix
  std::vector<std::string> overrides;  // --set key=value, on top of the checkpoint's config
  int ranks = 0;                       // processes to run as; 0: as many as the run had
  bool detach = false;                 // start in the background, output to a log file
  std::optional<int64_t> fork_step;    // a fork: from the checkpoint at or before this step
  std::string fork_name;               // and under this name (default RUN-fork-STEP)
  TokenOptions token;                  // the dashboard's token, for a run that served one with it
  std::string serve;                   // --serve HOST:PORT: the dashboard there, not where it was
  bool no_serve = false;               // --no-serve: no dashboard (kiln serve shows the run)
};

// Continues a released, stopped, failed, lost or completed run, or one whose process on this
// host is gone, from its newest checkpoint as the same run (or, with fork_step, forks it).
// Replaces this process with the training one unless options.detach.
void relaunch_run(const RelaunchOptions& options);

// kiln runs fork RUN --step N [--set key=value ...] [--name NAME] [--ranks N] [--detach]
//                [--serve HOST:PORT | --no-serve] [--token TOKEN | --token-file FILE]
void add_runs_fork_command(CLI::App& runs);

// The --set, --ranks, --detach, --serve, --no-serve, --token and --token-file options `kiln
// runs resume` adds for an ended run.
void add_relaunch_options(CLI::App* command, RelaunchOptions& options);

}  // namespace kiln
