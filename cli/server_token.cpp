#include "cli/server_token.h"

#include <cstdlib>

#include "base/check.h"
#include "base/private_files.h"

namespace kiln {
namespace {

// A token is a line of a few dozen characters; a file much longer is not a token file (a link
// to /dev/zero, a log named by mistake) and is refused rather than read whole.
constexpr size_t kMaxTokenFileBytes = 4096;

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
  // A regular file, a link to one allowed (~/.kiln-token -> a secrets folder): a FIFO or a
  // device is refused at once, never waited on nor read without end.
  std::string token = read_small_file(path, kMaxTokenFileBytes, true, "--token-file");
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
  // Set is set: KILN_TOKEN= is a blank token, refused, not taken for none.
  const char* env = std::getenv("KILN_TOKEN");
  if (env) return checked(env, "$KILN_TOKEN");
  return {};
}

}  // namespace kiln
