// The training processes the UI started: each in its own session (so Ctrl-C in the UI does
// not reach it and it outlives the UI), its output in a log file, reaped when it exits. Each
// starts as base/child_process.h starts every child: no descriptor of the UI's but stdin
// (/dev/null), stdout and stderr (the log), and a log that is a planted link is refused.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace kiln::tui {

class Launcher {
 public:
  // Starts argv[0] (searched in PATH) with stdout and stderr appended to log_path, under
  // run_name. A refused log or a program that cannot start is a kiln::Error.
  void start(const std::vector<std::string>& argv, const std::string& log_path,
             const std::string& run_name);
  // Collects the exit status of every launched process that has ended.
  void reap();

  bool launched(const std::string& run_name) const { return processes_.count(run_name) > 0; }
  bool running(const std::string& run_name) const;
  // The exit code (128 + signal when killed) of a launched process that has ended.
  std::optional<int> exit_code(const std::string& run_name) const;
  std::string log_path(const std::string& run_name) const;
  // Sends SIGTERM to the run's process group (the trainer then stops at its next step), or
  // SIGKILL when it was already sent SIGTERM. False when the run is not ours or has ended.
  bool kill(const std::string& run_name);

 private:
  struct Process {
    pid_t pid = -1;
    std::string log_path;
    std::optional<int> exit_code;
    bool terminated = false;
  };
  std::map<std::string, Process> processes_;
};

}  // namespace kiln::tui
