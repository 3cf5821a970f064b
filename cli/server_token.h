// Where the dashboard's token comes from: --token TOKEN, --token-file PATH, else $KILN_TOKEN.
// A command line is visible to every user of the machine (ps), so the docs recommend the file
// or the variable; the stored command line shows --token *** either way.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kiln {

struct TokenOptions {
  std::string token;
  bool token_given = false;  // --token "" is a blank token, not no token
  std::string file;
};

// Adds --token and --token-file (exclusive) to a subcommand; with `needs`, both need it.
void add_token_options(CLI::App* command, TokenOptions& options, CLI::Option* needs = nullptr);

// The token, or "" for none. A blank token, one with spaces or control characters, or a
// file that cannot be read is a kiln::Error naming where it came from.
std::string resolve_token(const TokenOptions& options);

}  // namespace kiln
