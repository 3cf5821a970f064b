// The argument parser's failures as kiln says every error: one line, for `kiln: error: `.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kiln {

// The line for a parse failure of `args` (argv without the program name). A value after
// `--set key` that should have been `--set key=value` says so, with the line to write.
std::string parse_error_line(const CLI::ParseError& error, const std::vector<std::string>& args);

// Checked before parsing, so that `--help` after a wrong command word does not print the
// help of the command above it: refuses (kiln::Error) a word that names no command where
// `args` must name one (`kiln trian`, `kiln runs shw 1`), naming the closest command, and a
// command group given without its command (`kiln runs`), listing them.
void check_command_words(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace kiln
