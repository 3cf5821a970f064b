#include "trainer/parallel/host_spans.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

#include "base/check.h"

namespace kiln {
namespace {

// "0-1", "0,2", "3": a host's ranks, runs of consecutive ranks joined.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

// "rank 3", "ranks 0-1": ranks and their word.
std::string ranks_text(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  text += rank_ranges(ranks);
  return text;
}

// `ranks` grouped by host, the hosts in the order of their first rank; a rank past the end of
// host_of_rank is on "?".
std::vector<std::pair<std::string, std::vector<int>>> by_host(const std::vector<int>& ranks,
                                                              const std::vector<std::string>& host_of_rank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (const int r : ranks) {
    const std::string host = static_cast<size_t>(r) < host_of_rank.size() ? host_of_rank[static_cast<size_t>(r)] : "?";
    const auto at = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == host; });
    if (at == groups.end()) {
      groups.push_back({host, {r}});
    } else {
      at->second.push_back(r);
    }
  }
  return groups;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

}  // namespace

std::vector<std::string> describe_host_spans(const ParallelLayout& layout,
                                             const std::vector<std::string>& host_of_rank) {
  KILN_CHECK(static_cast<int>(host_of_rank.size()) == layout.world(),
             fmt::format("host spans: {} host names for a world of {}", host_of_rank.size(), layout.world()));
  std::vector<int> all(static_cast<size_t>(layout.world()));
  std::iota(all.begin(), all.end(), 0);
  const auto hosts = by_host(all, host_of_rank);
  if (hosts.size() < 2) return {};
  std::string placed;
  for (const auto& [host, ranks] : hosts) {
    if (!placed.empty()) placed += "; ";
    placed += host + " " + ranks_text(ranks);
  }
  std::vector<std::string> lines = {fmt::format("{} hosts: {}", hosts.size(), placed)};

  using Members = std::function<std::vector<int>(int)>;
  const std::pair<const char*, Members> kinds[] = {
      {"tensor", [&](int r) { return layout.tensor_group(r); }},
      {"context", [&](int r) { return layout.context_group(r); }},
      {"data-parallel", [&](int r) { return layout.data_group(r); }},
      {"pipeline", [&](int r) { return layout.pipeline_group(r); }},
      {"expert", [&](int r) { return layout.expert_group(r); }},
  };
  std::vector<std::string> within, across;
  for (const auto& [name, members] : kinds) {
    if (members(0).size() < 2) continue;
    bool crosses = false;
    for (int r = 0; r < layout.world() && !crosses; ++r)
      for (int other : members(r)) crosses = crosses || host_of_rank[other] != host_of_rank[r];
    (crosses ? across : within).push_back(name);
  }
  if (!within.empty()) lines.push_back(fmt::format("{} groups within a host", joined(within)));
  if (!across.empty())
    lines.push_back(fmt::format("{} groups cross hosts: their collectives go over the network", joined(across)));
  return lines;
}

std::string describe_ranks_by_host(const std::vector<int>& ranks, const std::vector<std::string>& host_of_rank) {
  std::vector<std::string> parts;
  for (const auto& [host, on_host] : by_host(ranks, host_of_rank)) parts.push_back(ranks_text(on_host) + " on " + host);
  return joined(parts);
}

}  // namespace kiln
