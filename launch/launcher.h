// The processes kiln launched and keeps track of, by run name: the terminal UI's runs and a
// sweep's points. Each starts as base/child_process.h starts every child (no descriptor of
// kiln's but stdin (/dev/null), stdout and stderr (the log), a log that is a planted link
// refused), in a session of its own when detached (so Ctrl-C in the UI does not reach it and
// it outlives the UI) or else in a process group of its own, and is reaped when it exits.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/child_process.h"

namespace kiln::launch {

class Launcher {
 public:
  // Starts the command under run_name and returns its pid. A refused log or a program that
  // cannot start is a kiln::Error (base/child_process.h's line), and nothing is kept.
  pid_t start(const std::string& run_name, const ChildCommand& command);
  // Collects the exit status of every launched process that has ended; returns the names
  // of those that ended since the last call, in the order they were launched.
  std::vector<std::string> reap();

  bool launched(const std::string& run_name) const { return find(run_name) != nullptr; }
  bool running(const std::string& run_name) const;
  // How many launched processes have not ended.
  size_t running_count() const;
  // The exit code (128 + signal when killed) of a launched process that has ended.
  std::optional<int> exit_code(const std::string& run_name) const;
  std::string log_path(const std::string& run_name) const;
  // Sends SIGTERM to the run's process group (the trainer then stops at its next step), or
  // SIGKILL when it was already sent SIGTERM. False when the run is not ours or has ended.
  bool kill(const std::string& run_name);
  // Sends one SIGTERM to each running process itself, not its group: a kiln train of
  // several ranks hands it to its ranks through mpirun, and a second signal would end a
  // training at once, without its checkpoint.
  void stop_all();

 private:
  struct Process {
    std::string run_name;
    pid_t pid = -1;
    std::string log_path;
    std::optional<int> exit_code;
    bool terminated = false;
  };
  const Process* find(const std::string& run_name) const;
  Process* find(const std::string& run_name);
  std::vector<Process> processes_;  // in launch order
};

}  // namespace kiln::launch
