#include "cli/next_steps.h"

#include <fmt/core.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "cli/store_path.h"

namespace kiln {
namespace {

std::string resume_command(const std::string& name, const std::string& store_flag) {
  return "kiln runs resume " + shell_quote(name) + store_flag;
}

}  // namespace

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string next_steps(const FinishedRun& run) {
  std::vector<std::pair<std::string, std::string>> steps;  // a command and what it does
  if (run.recorded) {
    steps.emplace_back("kiln runs show " + shell_quote(run.name) + run.store_flag, "the run's record");
    steps.emplace_back("kiln serve" + run.store_flag, "the dashboard over every run");
    steps.emplace_back("kiln tui" + run.store_flag, "the terminal UI");
  }
  if (!run.last_checkpoint.empty()) {
    const std::string prompt = run.prompt.empty() ? "" : " --prompt " + shell_quote(run.prompt);
    steps.emplace_back("kiln generate --checkpoint " + shell_quote(run.last_checkpoint) + prompt,
                       "sample from its last checkpoint");
  }
  if (steps.empty()) return "";
  // The words in a column, and two spaces at least after a longer command, so that each
  // command copies cleanly.
  std::string lines = "next:\n";
  constexpr size_t kColumn = 45;
  for (const auto& [command, what] : steps)
    lines += "  " + command + std::string(command.size() + 2 < kColumn ? kColumn - command.size() : 2, ' ') + what + "\n";
  return lines;
}

std::string store_flag(const std::string& store_path) {
  return store_path.empty() || store_path == resolve_store_path("") ? "" : " --store " + shell_quote(store_path);
}

std::string continue_line(const std::string& name, const std::string& store_flag) {
  return "continue it with: " + resume_command(name, store_flag);
}

}  // namespace kiln
