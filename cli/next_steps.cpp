#include "cli/next_steps.h"

#include <fmt/core.h>

namespace kiln {

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string next_steps(const FinishedRun& run) {
  std::string lines;
  const auto add = [&lines](const std::string& command, const char* what) {
    lines += fmt::format("  {:<44} {}\n", command, what);
  };
  if (run.recorded && run.released)
    add("kiln runs resume " + shell_quote(run.name) + run.store_flag, "continue it from its checkpoint");
  if (run.recorded) {
    add("kiln runs show " + shell_quote(run.name) + run.store_flag, "the run's record");
    add("kiln serve" + run.store_flag, "the dashboard over every run");
    add("kiln tui" + run.store_flag, "the terminal UI");
  }
  if (!run.last_checkpoint.empty()) {
    const std::string prompt = run.prompt.empty() ? "" : " --prompt " + shell_quote(run.prompt);
    add("kiln generate --checkpoint " + shell_quote(run.last_checkpoint) + prompt, "sample from its last checkpoint");
  }
  return lines.empty() ? lines : "next:\n" + lines;
}

}  // namespace kiln
