#include "cli/server_token.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/check.h"

namespace kiln {
namespace {

// A token travels in an HTTP header ("Authorization: Bearer TOKEN"), so it is one word of
// printable characters; a blank one would let the server listen beyond loopback guarded by
// nothing.
std::string checked(std::string token, const std::string& source) {
  if (token.find_first_not_of(" \t\r\n") == std::string::npos)
    fail(source + " is blank; give a token (one word of printable characters), or none to listen on "
                  "loopback only");
  for (const char c : token)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
      fail(source + " holds a space or a control character; a token is one word of printable characters");
  return token;
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--token-file " + path + ": cannot read it");
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  // One line, as `openssl rand -hex 32 > FILE` writes it: the line break is not the token's.
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  return checked(token, "--token-file " + path);
}

}  // namespace

void add_token_options(CLI::App* command, TokenOptions& options, CLI::Option* needs) {
  CLI::Option* token = command->add_option(
      "--token", options.token,
      "Token that requests changing a run must carry (visible to other users in ps: prefer "
      "--token-file or $KILN_TOKEN)");
  token->each([&options](const std::string&) { options.token_given = true; });
  CLI::Option* file = command->add_option("--token-file", options.file,
                                          "Read the token from this file (its first line)");
  file->excludes(token);
  if (needs) {
    token->needs(needs);
    file->needs(needs);
  }
}

std::string resolve_token(const TokenOptions& options) {
  if (!options.file.empty()) return read_token_file(options.file);
  if (options.token_given) return checked(options.token, "--token");
  const char* env = std::getenv("KILN_TOKEN");
  if (env && *env) return checked(env, "$KILN_TOKEN");
  return {};
}

}  // namespace kiln
