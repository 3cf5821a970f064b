// The `kiln train` command every launcher starts (the terminal UI's launch form, a sweep's
// points, `kiln runs resume` and `kiln runs fork`): the kiln binary that launches it, `train`,
// the caller's words, and `--ranks R` for a run of several ranks (kiln train starts them under
// mpirun itself, as this machine needs it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/child_process.h"

namespace kiln::launch {

struct TrainCommand {
  std::string kiln;               // the kiln binary to start (this_kiln(), usually)
  std::vector<std::string> args;  // after `kiln train`
  int ranks = 1;                  // > 1: `--ranks R` after the args
  std::string log_path;           // stdout and stderr; empty: kiln's own
  // A session of its own, outliving kiln (the UI's runs, a detached resume); otherwise a
  // process group of its own that kiln waits for (a sweep's points).
  bool detached = true;
  // "NAME=value" each; nullopt: kiln's own environment.
  std::optional<std::vector<std::string>> environment;
};

// The process to start: argv {kiln, "train", args..., [--ranks R]} and how
// (base/child_process.h).
ChildCommand train_child(const TrainCommand& command);

// The path of the running kiln binary, which a launch starts again; a kiln::Error when it
// cannot be found.
std::string this_kiln();

}  // namespace kiln::launch
