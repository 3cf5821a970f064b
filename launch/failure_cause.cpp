#include "launch/failure_cause.h"

#include <cctype>
#include <string_view>

#include <fmt/core.h>

namespace kiln::launch {
namespace {

constexpr std::string_view kKilnError = "kiln: error: ";
constexpr size_t kMostCauseBytes = 400;

bool host_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'; }

// The hosts named in the line as whole words, in the order of `hosts`.
std::vector<std::string> hosts_in(std::string_view line, const std::vector<std::string>& hosts) {
  std::vector<std::string> named;
  for (const std::string& host : hosts) {
    if (host.empty()) continue;
    for (size_t at = line.find(host); at != std::string_view::npos; at = line.find(host, at + 1)) {
      const size_t end = at + host.size();
      if ((at == 0 || !host_char(line[at - 1])) && (end == line.size() || !host_char(line[end]) ||
                                                    (line[end] == '.' && end + 1 == line.size()))) {
        named.push_back(host);
        break;
      }
    }
  }
  return named;
}

std::string trimmed(std::string_view line) {
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
  if (line.size() > kMostCauseBytes) return std::string(line.substr(0, kMostCauseBytes)) + "...";
  return std::string(line);
}

// mpirun's "noticed that process rank R with PID P on node H exited on signal S (NAME)." as
// "rank R on H exited on signal S (NAME)".
std::string dead_rank(std::string_view line) {
  const size_t rank = line.find("process rank ");
  const size_t pid = line.find(" with PID ");
  const size_t node = line.find(" on node ");
  if (rank == std::string_view::npos || pid == std::string_view::npos || node == std::string_view::npos) return trimmed(line);
  std::string_view rest = line.substr(node);
  if (!rest.empty() && rest.back() == '.') rest.remove_suffix(1);
  return trimmed(fmt::format("{}{}", line.substr(rank + 8, pid - rank - 8), rest));
}

}  // namespace

FailureCause failure_cause(const std::vector<std::string>& lines, const std::vector<std::string>& hosts,
                           int exit_code) {
  std::string first_error;
  for (const std::string& line : lines) {
    const size_t error = line.find(kKilnError);
    if (error != std::string::npos && first_error.empty()) first_error = trimmed(line.substr(error + kKilnError.size()));
    if (const size_t roll = line.find("did not answer a roll call"); roll != std::string::npos) {
      // The hosts of the clause that names who did not answer, not of the rank that called.
      const size_t clause = line.rfind(": ", roll);
      return {error != std::string::npos ? trimmed(line.substr(error + kKilnError.size())) : trimmed(line),
              hosts_in(std::string_view(line).substr(clause == std::string::npos ? 0 : clause), hosts)};
    }
  }
  for (const std::string& line : lines) {
    if (line.find("noticed that process rank ") != std::string::npos && line.find(" exited on signal ") != std::string::npos)
      return {dead_rank(line), hosts_in(line.substr(line.find(" on node ")), hosts)};
    if (const size_t remote = line.find("Remote daemon:"); remote != std::string::npos) {
      std::vector<std::string> named = hosts_in(std::string_view(line).substr(remote), hosts);
      return {fmt::format("mpirun lost its daemon on {}", named.empty() ? trimmed(line.substr(remote + 14)) : named.front()),
              named};
    }
  }
  if (!first_error.empty()) return {first_error, {}};
  return {exit_code > 128 ? fmt::format("the launch ended on signal {}", exit_code - 128)
                          : fmt::format("the launch exited with status {}", exit_code),
          {}};
}

}  // namespace kiln::launch
