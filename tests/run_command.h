// Runs a shell command for the end-to-end tests and captures what it printed.
#pragma once

#include <cstdint>
#include <string>

#include "tests/test_files.h"

namespace kiln::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult run_command(const std::string& command);

// Starts a shell command in the background, its output going to log_path; returns its pid.
int start_background(const std::string& command, const std::string& log_path);
// Waits for a background command: its exit code, or 128 + the signal that ended it.
int wait_exit(int pid);
// The file's whole text ("" when it cannot be read).
std::string read_text(const std::string& path);
// The first http:// URL a server (`kiln serve`, `kiln train --serve`) printed to its log,
// once it has; "" after 30 s.
std::string wait_for_url(const std::string& log_path);
// The port of such a URL (http://HOST:PORT).
uint16_t port_of(const std::string& url);

// The start of a command line that launches what follows as `ranks` MPI processes on this
// machine (more ranks than cores allowed; as root too, which mpirun refuses unless told).
std::string mpirun_command(int ranks);

// kiln's binary and the source tree: the environment's KILN_BINARY and KILN_SOURCE_DIR where
// set, else the paths this test binary was built with. scripts/gpu-check sets them, so binaries
// built in one checkout (scripts/gpu-pack) run their tests from another, wherever it sits.
std::string kiln_binary();
std::string source_dir();

// What kiln promises of an error: one line, and nothing else.
inline bool is_one_line(const std::string& output) {
  return !output.empty() && output.find('\n') == output.size() - 1;
}

// The kiln the end-to-end tests run.
inline const std::string kiln = kiln_binary();

}  // namespace kiln::test
