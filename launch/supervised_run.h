// kiln train --max-restarts K (docs/resilience.md#restarting-by-itself): the launcher that
// starts the ranks (mpirun, or the one training process) stays and watches them. When the job
// fails, it starts it again from the run's newest complete checkpoint, as the same run, up to K
// times: on the same hosts, or with --exclude-failed without the hosts the failure names
// (launch/failure_cause.h), as many ranks fewer as they held where the layout allows. Each
// restart is a `restart` event of the run (cause, hosts, steps lost, time to train again), and
// the run's goodput is said at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch/hostfile.h"

namespace kiln::launch {

// Where a restart goes on from: the run's newest complete checkpoint.
struct RestartPoint {
  std::string checkpoint;  // its folder
  int64_t step = 0;
};

struct SupervisedRun {
  int ranks = 1;
  std::vector<Host> hosts;  // --hostfile's; empty: this machine
  int max_restarts = 0;
  bool exclude_failed = false;
  std::string kiln;  // the binary each attempt runs
  // Its words after the binary (`train` and its options, naming the run with --name): the
  // first attempt's as the user typed them, a restart's less the --resume, --config and
  // --layout that the checkpoint it resumes holds the outcome of.
  std::vector<std::string> first_args;
  std::vector<std::string> restart_args;
  std::string run_name;
  std::string store_path;  // where the run is recorded; empty: not recorded
  // The run's newest complete checkpoint; nullopt: none yet.
  std::function<std::optional<RestartPoint>()> newest_checkpoint;
  // Why the run's layout cannot train as `ranks` ranks; "" when it can.
  std::function<std::string(int ranks)> layout_refusal;
};

// Runs the attempts; returns the exit status of the last (0: the run ended as it should:
// completed, stopped or released). Ctrl-C and SIGTERM go to the attempt running, which stops
// with a checkpoint, and are never restarted. A first attempt that fails before its first
// step is not restarted either: it would fail the same way.
int supervise_run(const SupervisedRun& run);

// The word after "step" in a logged step line ("step  40/100 | loss ..."), or a restart's
// "kiln: restart N: training again at step S": the step; nullopt for any other line.
std::optional<int64_t> step_of_line(const std::string& line);

}  // namespace kiln::launch
