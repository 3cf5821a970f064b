// kiln runs resume (of a run that has ended, or whose process was killed) and kiln runs fork:
// `kiln train --resume` again from one of a run's checkpoints, in the folder the run was
// started in, as as many ranks as it ran, with its tags and the dashboard it served, the
// command rebuilt from the store's fields (the launch record store/run_launch.h, tags, ranks,
// the run's folder), never from its command line's text, which anyone who can write the store
// can write (docs/runs.md, docs/security.md). Every value is attached to its option
// ("--tag=-x"), so no recorded value reads as an option.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launch/train_command.h"
#include "store/database.h"
#include "store/types.h"

namespace kiln::launch {

// An option with its value as one word ("--tag=-x"), so no value reads as an option.
std::string with_value(std::string_view option, const std::string& value);

struct RelaunchRequest {
  std::string run;                     // id, name or prefix
  std::string store_path;              // absolute: where the training records itself
  std::vector<std::string> overrides;  // key=value each, on top of the checkpoint's config
  int ranks = 0;                       // processes to run as; 0: as many as the run had
  bool detach = false;                 // start in the background, output to a log file
  std::optional<int64_t> fork_step;    // a fork: from the checkpoint at or before this step
  std::string fork_name;               // and under this name (default RUN-fork-STEP)
  std::string host;                    // this machine's name, to tell a killed process here
};

struct Relaunch {
  store::RunRecord run;
  int64_t step = 0;        // the checkpoint's
  std::string checkpoint;  // its folder
  int ranks = 1;
  TrainCommand command;    // kiln train --resume=CHECKPOINT ..., its log with detach
  std::string workdir;     // where it starts: the run's folder, else here
  std::string token;       // the dashboard's, handed to the training in $KILN_TOKEN
  std::vector<std::string> notes;  // to say before it starts, once nothing can be refused
};

// The words that serve the run's dashboard again (--serve=..., --allow-host=..., ...), from
// its launch record checked as if typed, or none; the caller's, since the dashboard's rules are
// the monitor's. It may add notes and set the token; a refusal is a kiln::Error.
using DashboardWords = std::function<std::vector<std::string>(const store::RunRecord& run, Relaunch& relaunch)>;

// The launch of a released, stopped, failed, lost or completed run, or one whose process on
// this host is gone, from its newest checkpoint as the same run (or, with fork_step, a new run
// from the checkpoint at or before that step). A live run, a folder or checkpoint that is
// gone, or a taken fork name is a kiln::Error, and nothing starts.
Relaunch plan_relaunch(store::Database& db, const RelaunchRequest& request, const DashboardWords& dashboard);

// Starts it in its folder, with the token in $KILN_TOKEN (off the command line, where every
// user of the machine sees it): detached (a log path), in a session of its own, returning its
// pid; otherwise in this process's place, with nothing open of kiln's but its terminal.
pid_t start_relaunch(const Relaunch& relaunch);

}  // namespace kiln::launch
