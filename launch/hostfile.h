// The machines `kiln train --hostfile FILE` runs on: Open MPI's hostfile format, one host a
// line ("node-1 slots=8"), `#` to the line's end a comment, blank lines ignored.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln::launch {

inline constexpr size_t kMaxHosts = 4096;

struct Host {
  std::string name;
  std::optional<int> slots;  // slots=N: how many ranks it takes at most; nullopt: not said
};

// The hosts of the file, in its order. A file that cannot be read, a line that is not
// `NAME [slots=N] [max_slots=N]`, a name that is not a host name, a host twice, no host, or
// more than kMaxHosts is a kiln::Error naming the file and line.
std::vector<Host> read_hostfile(const std::string& path);
std::vector<Host> parse_hostfile(const std::string& text, const std::string& path);

// How `ranks` ranks spread over `hosts`: the same number on each, which must divide, and
// which no host's slots may be under. A kiln::Error says why not.
int ranks_per_host(int ranks, const std::vector<Host>& hosts);

}  // namespace kiln::launch
