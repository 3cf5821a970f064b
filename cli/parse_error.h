// The argument parser's failures as kiln says every error: one line, for `kiln: error: `.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kiln {

// The line for a parse failure of `args` (argv without the program name). A value after
// `--set key` that should have been `--set key=value` says so, with the line to write.
std::string parse_error_line(const CLI::ParseError& error, const std::vector<std::string>& args);

}  // namespace kiln
