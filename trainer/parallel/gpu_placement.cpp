#include "trainer/parallel/gpu_placement.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/check.h"

namespace kiln {
namespace {

// Texts travel as fixed-width int64 words: a host name is at most 64 bytes (HOST_NAME_MAX on
// Linux), a PCI bus id 16.
constexpr size_t kHostWords = 8, kBusWords = 4;

template <size_t Words>
std::array<int64_t, Words> to_words(const std::string& text) {
  std::array<int64_t, Words> words{};
  std::memcpy(words.data(), text.data(), std::min(text.size(), Words * 8 - 1));
  return words;
}

std::string from_words(const int64_t* words, size_t count) {
  const auto* bytes = reinterpret_cast<const char*>(words);
  return std::string(bytes, strnlen(bytes, count * 8));
}

Tensor host_words(int64_t* data, size_t count) {
  return Tensor{data, DType::I64, {static_cast<int64_t>(count)}};
}

}  // namespace

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::string placement_host() {
  const char* id = std::getenv("NCCL_HOSTID");
  return id && *id ? id : host_name();
}

NodePlacement node_placement(Communicator& world, const std::string& host) {
  std::array<int64_t, kHostWords> mine = to_words<kHostWords>(host);
  std::vector<int64_t> all(kHostWords * static_cast<size_t>(world.size()));
  world.all_gather(host_words(all.data(), all.size()), host_words(mine.data(), mine.size()));
  NodePlacement placement{0, 0};
  for (int r = 0; r < world.size(); ++r) {
    if (!std::equal(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(r * kHostWords))) continue;
    if (r < world.rank()) ++placement.local_rank;
    ++placement.local_size;
  }
  return placement;
}

int gpu_for_rank(const NodePlacement& placement, int visible_gpus, bool shares) {
  KILN_CHECK(visible_gpus > 0, "gpu_for_rank: no GPU to choose from");
  if (!shares && placement.local_size > visible_gpus)
    fail(fmt::format("parallel.device_comm=nccl: {} ranks on this machine but {} GPU{} visible, and NCCL "
                     "refuses two ranks on one GPU (\"Duplicate GPU detected\"); start one rank a GPU, "
                     "or share the GPUs with parallel.device_comm=mpi",
                     placement.local_size, visible_gpus, visible_gpus == 1 ? "" : "s"));
  return placement.local_rank % visible_gpus;
}

std::vector<RankGpu> gather_rank_gpus(Communicator& world, const RankGpu& mine) {
  constexpr size_t kWords = kHostWords + 1 + kBusWords + 1;
  std::array<int64_t, kWords> record{};
  const auto host = to_words<kHostWords>(mine.host);
  const auto bus = to_words<kBusWords>(mine.bus_id);
  std::copy(host.begin(), host.end(), record.begin());
  record[kHostWords] = mine.gpu;
  std::copy(bus.begin(), bus.end(), record.begin() + kHostWords + 1);
  record[kWords - 1] = mine.pid;
  const bool root = world.rank() == 0;
  std::vector<int64_t> all(root ? kWords * static_cast<size_t>(world.size()) : 0);
  world.gather(host_words(all.data(), all.size()), host_words(record.data(), record.size()), 0);
  std::vector<RankGpu> ranks;
  for (size_t at = 0; at < all.size(); at += kWords)
    ranks.push_back({from_words(&all[at], kHostWords), static_cast<int>(all[at + kHostWords]),
                     from_words(&all[at + kHostWords + 1], kBusWords), all[at + kWords - 1]});
  return ranks;
}

std::vector<std::string> describe_rank_gpus(const std::vector<RankGpu>& ranks, size_t max_hosts) {
  std::vector<std::string> hosts, lines;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto at = std::find(hosts.begin(), hosts.end(), ranks[r].host);
    const size_t index = static_cast<size_t>(at - hosts.begin());
    if (at == hosts.end()) {
      hosts.push_back(ranks[r].host);
      if (index < max_hosts) lines.push_back("GPUs on " + ranks[r].host + ":");
    }
    if (index < max_hosts)
      lines[index] += fmt::format("{} rank {} on GPU {} ({})", lines[index].back() == ':' ? "" : ",", r,
                                  ranks[r].gpu, ranks[r].bus_id);
  }
  if (hosts.size() > max_hosts)
    lines.push_back(fmt::format("and {} more host{}", hosts.size() - max_hosts,
                                hosts.size() - max_hosts == 1 ? "" : "s"));
  return lines;
}

}  // namespace kiln
