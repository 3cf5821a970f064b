#include "trainer/model/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln {

ExpertRoute route_rule(const MoeConfig& moe, int64_t tokens) {
  ExpertRoute r;
  r.experts = moe.num_experts;
  r.top_k = moe.top_k;
  r.sigmoid = moe.score == "sigmoid";
  r.normalize = moe.normalize_top_k;
  r.gate_scale = moe.gate_scale;
  r.groups = moe.route_groups;
  r.groups_topk = moe.route_groups_topk;
  r.capacity = expert_capacity(moe, tokens);
  r.drop_by_gate = moe.drop_policy == "probs";
  r.pad = moe.pad_to_capacity;
  return r;
}

int64_t expert_capacity(const MoeConfig& moe, int64_t tokens) {
  if (moe.capacity_factor <= 0) return 0;
  const double share = moe.capacity_factor * static_cast<double>(tokens * moe.top_k) / moe.num_experts;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(share - 1e-9)));
}

int64_t max_expert_rows(const MoeConfig& moe, int64_t tokens) { return route_rule(moe, tokens).most_rows(tokens); }

int64_t max_received_expert_rows(const MoeConfig& moe, int64_t tokens, int ep) {
  const int64_t local = moe.num_experts / ep, capacity = expert_capacity(moe, tokens);
  int64_t from_each = tokens * std::min<int64_t>(moe.top_k, local);
  if (capacity > 0)
    from_each = moe.pad_to_capacity ? capacity * local : std::min(from_each, capacity * local);
  return ep * from_each;
}

void move_selection_bias(std::vector<double>& bias, const std::vector<int64_t>& routed, double rate) {
  const double mean = std::accumulate(routed.begin(), routed.end(), 0.0) / static_cast<double>(routed.size());
  for (size_t e = 0; e < bias.size(); ++e) {
    const double load = static_cast<double>(routed[e]);
    bias[e] += load < mean ? rate : load > mean ? -rate : 0.0;
  }
}

}  // namespace kiln
