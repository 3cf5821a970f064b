// The processes kiln starts for the user (docs/security.md#hooks-and-the-processes-kiln-starts):
// a training run that a sweep, the terminal UI or `kiln runs resume --detach` launches, and an
// alert's hook. Every one starts the same way:
//   - with stdin, stdout and stderr and no other descriptor of kiln's: whatever kiln holds
//     (the dashboard's listening socket and its clients' connections, the store, a checkpoint
//     being written) is closed in the child, close-on-exec or not, so a child that outlives
//     kiln holds none of them;
//   - in a process group of its own (or a session of its own, when detached), so that the
//     terminal's Ctrl-C reaches kiln alone and kill(-pid) reaches all that the child started;
//   - with default signal dispositions and no blocked signals, whatever kiln set for itself;
//   - its output appended to a log opened as open_private_log opens it (0600, a symbolic link
//     planted at the path or another user's file refused), or else to kiln's own.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct ChildCommand {
  std::vector<std::string> argv;  // argv[0] is searched in PATH unless it holds a '/'
  // The child's environment, "NAME=value" each; nullopt: kiln's own.
  std::optional<std::vector<std::string>> environment;
  // A session of its own (setsid): no controlling terminal, so the terminal's hang-up and
  // Ctrl-C leave it running after kiln exits. Otherwise a process group of its own.
  bool detached = false;
  // The file stdout and stderr append to; empty: kiln's own stdout and stderr, or the
  // descriptors below.
  std::string log_path;
  // The descriptors the child writes as stdout and stderr (kiln keeps its own copies; a pipe
  // kiln reads, say); -1: as log_path says.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // The descriptor the child reads as stdin (kiln keeps its own copy); -1: /dev/null.
  int stdin_fd = -1;
};

// Starts the command and returns its pid, which is also its process group's id. A refused
// log, or a program that cannot be started (not found, not executable), is a kiln::Error
// naming it.
pid_t start_child(const ChildCommand& command);

// Closes every descriptor above stderr, for a process about to replace itself with another
// program (exec) that must inherit only stdin, stdout and stderr.
void close_all_but_standard_streams();

}  // namespace kiln
