// Text without the blanks (spaces and tabs) around it: what the config, `--set` settings,
// fault plans and index files read a value as.
#pragma once

#include <string_view>

namespace kiln {

inline std::string_view trim_blanks(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace kiln
