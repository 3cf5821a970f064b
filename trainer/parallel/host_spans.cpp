#include "trainer/parallel/host_spans.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>

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
  std::vector<std::string> hosts;
  std::vector<std::vector<int>> ranks_on;
  for (int r = 0; r < layout.world(); ++r) {
    const size_t h = static_cast<size_t>(std::find(hosts.begin(), hosts.end(), host_of_rank[r]) - hosts.begin());
    if (h == hosts.size()) {
      hosts.push_back(host_of_rank[r]);
      ranks_on.emplace_back();
    }
    ranks_on[h].push_back(r);
  }
  if (hosts.size() < 2) return {};
  std::string placed;
  for (size_t h = 0; h < hosts.size(); ++h)
    placed += fmt::format("{}{} rank{} {}", h == 0 ? "" : "; ", hosts[h], ranks_on[h].size() == 1 ? "" : "s",
                          rank_ranges(ranks_on[h]));
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
  const auto host_of = [&](int r) {
    return static_cast<size_t>(r) < host_of_rank.size() ? host_of_rank[static_cast<size_t>(r)] : std::string("?");
  };
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    // A run of consecutive ranks on one host.
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1 && host_of(ranks[j + 1]) == host_of(ranks[i])) ++j;
    parts.push_back(j == i ? fmt::format("rank {} on {}", ranks[i], host_of(ranks[i]))
                           : fmt::format("ranks {}-{} on {}", ranks[i], ranks[j], host_of(ranks[i])));
    i = j + 1;
  }
  return joined(parts);
}

}  // namespace kiln
