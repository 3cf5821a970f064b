// How a mixture-of-experts router turns its logits into choices, gates and rows: the rule the
// op table's routing ops (ops.h: route_tokens, route_rows, route_backward) follow on every
// backend, in kernel terms (trainer/model/expert_routing.h makes it from the config).
//
// Forward, per token n with logits z[n, :] over E experts:
//   scores s = softmax(z) or sigmoid(z);
//   the top_k experts by s + bias (the selection bias of aux-loss-free balancing, which never
//   weighs an output), best first, ties to the lower expert; under group-limited routing
//   (groups > 1) only among the experts of the token's groups_topk best groups of E / groups
//   consecutive experts, a group scored by the sum of its top_k / groups_topk best s + bias
//   (DeepSeek-V3's node-limited routing; Megatron's group-limited top-k), ties to the lower group;
//   gates g_j = gate_scale * s[e_j], divided by the chosen scores' sum when normalize;
//   with a capacity, an expert that drew more choices keeps the `capacity` with the highest
//   gates (drop_by_gate; ties to the earlier choice) or the earliest, and drops the rest.
// Rows: the kept choices expert by expert, in choice order (token by token, best first within
// a token), each expert's padded with empty rows to the capacity when pad.
//
// Losses (route_backward; their values are statistics the ops report):
//   balance = E / (N T top_k) * sum_e P_e c_e, P_e the sum over this rank's N tokens of the
//     routing probabilities (s, or s divided by its sum for sigmoid scores) and c_e the
//     choices of expert e, before any drop, among the T tokens the loss covers (N, or a whole
//     micro-batch that several ranks route shares of): Switch/GShard's, 1 when the load is
//     even (Megatron's form);
//   z = mean over tokens of logsumexp(z[n, :])^2 (ST-MoE's router z-loss);
//   entropy = mean over tokens of the routing probabilities' entropy, in nats (reported only).
#pragma once

#include <cstdint>

namespace kiln {

struct ExpertRoute {
  int64_t experts = 0;
  int64_t top_k = 1;
  bool sigmoid = false;    // the scores: sigmoid (else softmax)
  bool normalize = false;  // gates divided by the sum of the chosen scores
  double gate_scale = 1;
  int64_t groups = 1;       // group-limited routing: the groups of consecutive experts ...
  int64_t groups_topk = 1;  // ... and how many of them a token may choose from
  int64_t capacity = 0;     // the most choices an expert keeps; 0: no limit
  bool drop_by_gate = true;  // over capacity, the lowest gates go (else the latest choices)
  bool pad = false;          // every expert's rows padded to the capacity

  int64_t group_size() const { return experts / groups; }
  // The most rows N tokens can take.
  int64_t most_rows(int64_t tokens) const {
    const int64_t choices = tokens * top_k;
    if (capacity == 0) return choices;
    return pad ? capacity * experts : (choices < capacity * experts ? choices : capacity * experts);
  }
};

// What the router's losses weigh in route_backward: `tokens` T, the tokens the balancing
// loss's choices c_e count; `balance` and `z`, the losses' coefficients times the
// micro-batch's weight in the step's loss (each loss is a mean over this rank's tokens).
struct RouteLoss {
  int64_t tokens = 0;
  double balance = 0;
  double z = 0;
};

}  // namespace kiln
