#include "launch/hostfile.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include <fmt/core.h>

#include "base/check.h"
#include "base/private_files.h"

namespace kiln::launch {
namespace {

constexpr size_t kMaxHostfileBytes = 1 << 20;

// Letters, digits, '-', '.' and '_', as host names and addresses are written; nothing that
// mpirun's command line or a shell would read as more.
bool is_host_name(const std::string& name) {
  return !name.empty() && name.size() <= 253 && name.front() != '-' &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'; });
}

// The N of `key=N`, a whole number from 1 to 1 << 20; nullopt when the word is not `key=`.
std::optional<int> count_of(const std::string& word, const std::string& key, const std::string& where) {
  if (word.rfind(key + "=", 0) != 0) return std::nullopt;
  const std::string text = word.substr(key.size() + 1);
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value > (1 << 20))
    fail(fmt::format("{}: {}: expected a whole number of 1 or more", where, word));
  return value;
}

}  // namespace

std::vector<Host> parse_hostfile(const std::string& text, const std::string& path) {
  std::vector<Host> hosts;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string where = fmt::format("--hostfile {}, line {}", path, number);
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    Host host;
    host.name = word;
    if (!is_host_name(host.name))
      fail(fmt::format("{}: '{}' is not a host name (letters, digits, '-', '.', '_')", where, host.name));
    while (words >> word) {
      if (const auto slots = count_of(word, "slots", where)) host.slots = slots;
      else if (!count_of(word, "max_slots", where))
        fail(fmt::format("{}: '{}': expected slots=N or max_slots=N after the host's name", where, word));
    }
    if (std::any_of(hosts.begin(), hosts.end(), [&](const Host& h) { return h.name == host.name; }))
      fail(fmt::format("{}: {} is named twice; give each host once, with its slots", where, host.name));
    if (hosts.size() == kMaxHosts) fail(fmt::format("{}: more than {} hosts", where, kMaxHosts));
    hosts.push_back(std::move(host));
  }
  if (hosts.empty()) fail(fmt::format("--hostfile {}: names no host (one a line: NAME [slots=N])", path));
  return hosts;
}

std::vector<Host> read_hostfile(const std::string& path) {
  return parse_hostfile(read_small_file(path, kMaxHostfileBytes, false, "--hostfile"), path);
}

int ranks_per_host(int ranks, const std::vector<Host>& hosts) {
  const int count = static_cast<int>(hosts.size());
  if (ranks % count != 0)
    fail(fmt::format("{} ranks do not spread evenly over {} hosts; give a multiple of {}", ranks, count, count));
  const int each = ranks / count;
  for (const Host& host : hosts)
    if (host.slots && *host.slots < each)
      fail(fmt::format("{} ranks over {} hosts put {} on each, and {} has slots={}", ranks, count, each, host.name,
                       *host.slots));
  return each;
}

}  // namespace kiln::launch
