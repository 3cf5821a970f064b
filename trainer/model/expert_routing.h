// The router's decisions for one micro-batch of an MoE layer, and their gradient, computed on
// the host in double precision from the router's logits (the choice of experts is data
// dependent; the layer copies the logits here and the decisions back, see moe_mlp.h).
//
// Forward, per token n with logits z[n, :] over E experts:
//   scores s = softmax(z) or sigmoid(z) (moe.score);
//   the top_k experts by s + bias (the aux-loss-free selection bias, which never weighs an
//   output), best first, ties to the lower expert; under group-limited routing
//   (moe.route_groups > 1) only among the experts of the token's moe.route_groups_topk best
//   groups of consecutive experts, a group scored by the sum of its top_k / route_groups_topk
//   best s + bias (DeepSeek-V3's node-limited routing; Megatron's group-limited top-k);
//   gates g_j = s[e_j], divided by their sum when moe.normalize_top_k, times moe.gate_scale;
//   with a capacity (moe.capacity_factor), an expert that drew more choices than
//   ceil(factor * N * top_k / E) keeps the ones with the highest gates (or the earliest tokens)
//   and the rest are dropped: they add nothing to the token's output.
// The kept choices are laid out expert by expert, tokens in order, as the rows the experts
// compute (padded with empty rows to the capacity when moe.pad_to_capacity).
//
// Losses (their values are reported without coefficients; their gradients carry them):
//   balance = E / (N^2 top_k) * sum_e P_e c_e, with P_e the sum over tokens of the routing
//     probabilities (s, normalised per token for sigmoid scores) and c_e the choices of expert e
//     before any drop: Switch/GShard's loss, 1 when the load is even (Megatron's form);
//   z = mean over tokens of logsumexp(z[n, :])^2 (ST-MoE's router z-loss);
//   entropy = mean over tokens of the routing probabilities' entropy, in nats (reported only).
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/config/config.h"

namespace kiln {

struct ExpertRouting {
  int64_t tokens = 0, k = 0, experts = 0;
  std::vector<double> scores;     // [N, E]
  std::vector<int32_t> choice;    // [N, k] the expert of each choice, best first
  std::vector<double> gate;       // [N, k] its weight in the output (dropped or not)
  std::vector<double> kept_sum;   // [N] the sum the gates were divided by (1 unnormalised)
  std::vector<int32_t> row;       // [N, k] its row among the experts' rows, -1 when dropped
  std::vector<int32_t> source;    // [M] the token of each expert row, -1 for a padding row
  std::vector<double> row_gate;   // [M] the gate of each expert row, 0 for padding
  std::vector<int64_t> offsets;   // [E + 1] each expert's first row
  std::vector<int64_t> routed;    // [E] choices of each expert
  std::vector<int64_t> dropped;   // [E] of those, dropped by the capacity
  std::vector<double> probs_mean;    // [E] P_e / N: each expert's mean routing probability
  std::vector<double> choice_share;  // [E] c_e / (N top_k), of the micro-batch the loss covers
  double balance = 0, z = 0, entropy = 0;

  int64_t rows() const { return static_cast<int64_t>(source.size()); }
};

// The most choices an expert keeps from `tokens` tokens (0: no limit).
int64_t expert_capacity(const MoeConfig& moe, int64_t tokens);
// The most expert rows `tokens` tokens can take: what the layer lays its buffers out for.
int64_t max_expert_rows(const MoeConfig& moe, int64_t tokens);
// Under expert parallelism over ep ranks, the most rows one rank's experts (num_experts / ep
// of them) can receive from the `tokens` tokens of each rank of its expert group: a token
// sends at most min(top_k, local experts) rows there, and no expert more than its capacity.
int64_t max_received_expert_rows(const MoeConfig& moe, int64_t tokens, int ep);

// logits [tokens, E] row-major; bias [E] (zeros when aux-loss-free balancing is off).
ExpertRouting route_tokens(const MoeConfig& moe, const std::vector<double>& logits, int64_t tokens,
                           const std::vector<double>& bias);

// When routing covers a share of a micro-batch (whole experts under sequence parallelism),
// the balancing loss takes the choice shares of the whole: `routed` [E] choices of its
// `tokens` tokens. The shares' balance values then average, and their gradients add up, to
// the whole micro-batch's.
void balance_by_choices(ExpertRouting& routing, const std::vector<double>& routed, int64_t tokens);

// The gradient of the logits [tokens, E] given the gradient of each choice's gate d_gate
// [tokens, k] (0 for dropped choices), with the balancing and z losses added at their
// coefficients times loss_weight (the micro-batch's weight in the step's loss).
std::vector<double> route_backward(const MoeConfig& moe, const ExpertRouting& routing,
                                   const std::vector<double>& logits,
                                   const std::vector<double>& d_gate, double loss_weight);

// Aux-loss-free balancing (DeepSeek-V3): each expert's selection bias moves by `rate` up when
// it took fewer than the mean of `routed` choices, down when more.
void move_selection_bias(std::vector<double>& bias, const std::vector<int64_t>& routed, double rate);

}  // namespace kiln
