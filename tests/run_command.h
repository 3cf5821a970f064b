// Runs a shell command for the end-to-end tests and captures what it printed.
#pragma once

#include <string>

namespace kiln::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult run_command(const std::string& command);

// A fresh directory under the test temp dir.
std::string fresh_dir(const std::string& name);

}  // namespace kiln::test
