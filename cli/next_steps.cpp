#include "cli/next_steps.h"

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<std::string> shell_words(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t close = line.find('\'', i + 1);
      if (close == std::string_view::npos) fail("the recorded command line has an unclosed quote");
      word += line.substr(i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        word += line[i];
      }
      if (i >= line.size()) fail("the recorded command line has an unclosed quote");
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
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
