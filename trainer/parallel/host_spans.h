// Which of a run's groups reach across hosts. A group whose ranks share a host talks through
// that host's memory or links; one whose ranks are on several hosts talks over the network
// between them, which is slower and fails in more ways. Megatron's order puts the tensor
// group's ranks side by side so that a host holds whole tensor groups; this says, for the
// hosts a run actually has, which groups that held for.
#pragma once

#include <string>
#include <vector>

#include "trainer/parallel/layout.h"

namespace kiln {

// The lines the run prints at start when its ranks are on more than one host (none for one):
// each host with its ranks, then the kinds of group (of more than one rank) that stay within a
// host and those that cross hosts. `host_of_rank` is every rank's host name, in rank order.
std::vector<std::string> describe_host_spans(const ParallelLayout& layout,
                                             const std::vector<std::string>& host_of_rank);

// Ranks (sorted) by their hosts (`host_of_rank`, every rank's; "?" past its end), the hosts in
// the order of their first rank: "rank 2 on node-1", "ranks 2-3 on node-1", "ranks 1,3 on b",
// "rank 1 on a and rank 3 on b".
std::string describe_ranks_by_host(const std::vector<int>& ranks, const std::vector<std::string>& host_of_rank);

}  // namespace kiln
