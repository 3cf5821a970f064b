// An MoE layer's router from the config: the rule the op table's routing ops follow
// (kernels/expert_route.h says what they compute: scores, top-k with groups, gates, capacity,
// expert-major rows and the losses), the rows the layer lays its buffers out for, and
// aux-loss-free balancing's move of the selection bias between steps.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/expert_route.h"
#include "trainer/config/config.h"

namespace kiln {

// The rule for `tokens` tokens (the capacity is theirs): moe.score, top_k, normalize_top_k,
// gate_scale, route_groups, route_groups_topk, capacity_factor, drop_policy, pad_to_capacity.
ExpertRoute route_rule(const MoeConfig& moe, int64_t tokens);

// The most choices an expert keeps from `tokens` tokens (0: no limit):
// ceil(capacity_factor * tokens * top_k / experts).
int64_t expert_capacity(const MoeConfig& moe, int64_t tokens);
// The most expert rows `tokens` tokens can take: what the layer lays its buffers out for.
int64_t max_expert_rows(const MoeConfig& moe, int64_t tokens);
// Under expert parallelism over ep ranks, the most rows one rank's experts (num_experts / ep
// of them) can receive from the `tokens` tokens of each rank of its expert group: a token
// sends at most min(top_k, local experts) rows there, and no expert more than its capacity.
int64_t max_received_expert_rows(const MoeConfig& moe, int64_t tokens, int ep);

// Aux-loss-free balancing (DeepSeek-V3): each expert's selection bias moves by `rate` up when
// it took fewer than the mean of `routed` choices, down when more.
void move_selection_bias(std::vector<double>& bias, const std::vector<int64_t>& routed, double rate);

}  // namespace kiln
