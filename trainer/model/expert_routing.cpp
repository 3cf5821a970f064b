#include "trainer/model/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace kiln {

namespace {

bool sigmoid_scores(const MoeConfig& moe) { return moe.score == "sigmoid"; }

double log_sum_exp(const double* z, int64_t E) {
  const double top = *std::max_element(z, z + E);
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) sum += std::exp(z[e] - top);
  return top + std::log(sum);
}

// The token's routing probabilities p [E] from its scores: softmax scores already are;
// sigmoid scores are divided by their sum. Returns that sum (1 for softmax).
double probabilities(const MoeConfig& moe, const double* s, int64_t E, double* p) {
  const double sum = sigmoid_scores(moe) ? std::accumulate(s, s + E, 0.0) : 1.0;
  for (int64_t e = 0; e < E; ++e) p[e] = s[e] / sum;
  return sum;
}

// Group-limited routing's working space, kept between tokens so that a token allocates nothing.
struct GroupScratch {
  std::vector<double> score, mine;  // each group's score; one group's selection scores
  std::vector<int32_t> order;       // the groups, best first
};

// The experts token n may choose, into `candidates` (their count returned): every expert, or
// under group-limited routing (moe.route_groups > 1, DeepSeek-V3's and Megatron's) those of its
// route_groups_topk best groups of consecutive experts, each group scored by the sum of its
// top_k / route_groups_topk best selection scores (ties to the lower group). `value` [E]: the
// selection scores, s + bias.
int64_t selectable_experts(const MoeConfig& moe, const std::vector<double>& value, std::vector<int32_t>& candidates,
                           GroupScratch& scratch) {
  const int64_t E = moe.num_experts, G = moe.route_groups, per_group = E / G;
  if (G == 1) {
    std::iota(candidates.begin(), candidates.end(), 0);
    return E;
  }
  const int64_t best = moe.top_k / moe.route_groups_topk;
  std::vector<double>& group_score = scratch.score;
  std::vector<double>& mine = scratch.mine;
  group_score.resize(static_cast<size_t>(G));
  mine.resize(static_cast<size_t>(per_group));
  for (int64_t g = 0; g < G; ++g) {
    std::copy_n(value.begin() + g * per_group, per_group, mine.begin());
    std::partial_sort(mine.begin(), mine.begin() + best, mine.end(), std::greater<double>());
    group_score[static_cast<size_t>(g)] = std::accumulate(mine.begin(), mine.begin() + best, 0.0);
  }
  std::vector<int32_t>& groups = scratch.order;
  groups.resize(static_cast<size_t>(G));
  std::iota(groups.begin(), groups.end(), 0);
  std::partial_sort(groups.begin(), groups.begin() + moe.route_groups_topk, groups.end(), [&](int32_t a, int32_t b) {
    return group_score[a] != group_score[b] ? group_score[a] > group_score[b] : a < b;
  });
  std::sort(groups.begin(), groups.begin() + moe.route_groups_topk);
  int64_t count = 0;
  for (int64_t i = 0; i < moe.route_groups_topk; ++i)
    for (int64_t e = groups[static_cast<size_t>(i)] * per_group; e < (groups[static_cast<size_t>(i)] + 1) * per_group; ++e)
      candidates[static_cast<size_t>(count++)] = static_cast<int32_t>(e);
  return count;
}

}  // namespace

int64_t expert_capacity(const MoeConfig& moe, int64_t tokens) {
  if (moe.capacity_factor <= 0) return 0;
  const double share = moe.capacity_factor * static_cast<double>(tokens * moe.top_k) / moe.num_experts;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(share - 1e-9)));
}

int64_t max_expert_rows(const MoeConfig& moe, int64_t tokens) {
  const int64_t choices = tokens * moe.top_k, capacity = expert_capacity(moe, tokens);
  if (capacity == 0) return choices;
  const int64_t all = capacity * moe.num_experts;
  return moe.pad_to_capacity ? all : std::min(choices, all);
}

int64_t max_received_expert_rows(const MoeConfig& moe, int64_t tokens, int ep) {
  const int64_t local = moe.num_experts / ep, capacity = expert_capacity(moe, tokens);
  int64_t from_each = tokens * std::min<int64_t>(moe.top_k, local);
  if (capacity > 0)
    from_each = moe.pad_to_capacity ? capacity * local : std::min(from_each, capacity * local);
  return ep * from_each;
}

ExpertRouting route_tokens(const MoeConfig& moe, const std::vector<double>& logits, int64_t tokens,
                           const std::vector<double>& bias) {
  ExpertRouting r;
  const int64_t N = tokens, E = moe.num_experts, k = moe.top_k;
  r.tokens = N;
  r.k = k;
  r.experts = E;
  r.scores.resize(static_cast<size_t>(N * E));
  r.choice.resize(static_cast<size_t>(N * k));
  r.gate.resize(static_cast<size_t>(N * k));
  r.kept_sum.assign(static_cast<size_t>(N), 1.0);
  r.routed.assign(static_cast<size_t>(E), 0);
  r.dropped.assign(static_cast<size_t>(E), 0);
  std::vector<double> probs_sum(static_cast<size_t>(E), 0.0), p(static_cast<size_t>(E)), value(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  GroupScratch groups;
  for (int64_t n = 0; n < N; ++n) {
    const double* z = logits.data() + n * E;
    double* s = r.scores.data() + n * E;
    if (sigmoid_scores(moe)) {
      for (int64_t e = 0; e < E; ++e) s[e] = 1.0 / (1.0 + std::exp(-z[e]));
    } else {
      const double lse = log_sum_exp(z, E);
      for (int64_t e = 0; e < E; ++e) s[e] = std::exp(z[e] - lse);
    }
    for (int64_t e = 0; e < E; ++e) value[e] = s[e] + bias[e];
    const int64_t candidates = selectable_experts(moe, value, order, groups);
    std::partial_sort(order.begin(), order.begin() + k, order.begin() + candidates, [&](int32_t a, int32_t b) {
      return value[a] != value[b] ? value[a] > value[b] : a < b;
    });
    double kept = 0;
    for (int64_t j = 0; j < k; ++j) kept += s[order[j]];
    if (moe.normalize_top_k) r.kept_sum[n] = kept;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = order[j];
      r.choice[n * k + j] = e;
      r.gate[n * k + j] = moe.gate_scale * s[e] / r.kept_sum[n];
      ++r.routed[e];
    }
    probabilities(moe, s, E, p.data());
    double entropy = 0;
    for (int64_t e = 0; e < E; ++e) {
      probs_sum[e] += p[e];
      if (p[e] > 0) entropy -= p[e] * std::log(p[e]);
    }
    r.entropy += entropy / static_cast<double>(N);
    const double lse = log_sum_exp(z, E);
    r.z += lse * lse / static_cast<double>(N);
  }
  r.probs_mean.assign(static_cast<size_t>(E), 0.0);
  if (N > 0) {
    for (int64_t e = 0; e < E; ++e) r.probs_mean[e] = probs_sum[e] / static_cast<double>(N);
    balance_by_choices(r, std::vector<double>(r.routed.begin(), r.routed.end()), N);
  }

  // Each expert's choices in token order; over capacity, the lowest gates (or latest tokens)
  // are dropped.
  std::vector<std::vector<int64_t>> picked(static_cast<size_t>(E));  // choice indices n * k + j
  for (int64_t i = 0; i < N * k; ++i) picked[r.choice[static_cast<size_t>(i)]].push_back(i);
  const int64_t capacity = expert_capacity(moe, N);
  r.row.assign(static_cast<size_t>(N * k), -1);
  r.offsets.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) {
    std::vector<int64_t>& mine = picked[e];
    if (capacity > 0 && static_cast<int64_t>(mine.size()) > capacity) {
      if (moe.drop_policy == "probs")
        std::stable_sort(mine.begin(), mine.end(), [&](int64_t a, int64_t b) {
          return r.gate[a] > r.gate[b];
        });
      r.dropped[e] = static_cast<int64_t>(mine.size()) - capacity;
      mine.resize(static_cast<size_t>(capacity));
      std::sort(mine.begin(), mine.end());
    }
    for (int64_t i : mine) {
      r.row[i] = static_cast<int32_t>(r.source.size());
      r.source.push_back(static_cast<int32_t>(i / k));
      r.row_gate.push_back(r.gate[i]);
    }
    if (moe.pad_to_capacity)
      for (int64_t pad = static_cast<int64_t>(mine.size()); pad < capacity; ++pad) {
        r.source.push_back(-1);
        r.row_gate.push_back(0.0);
      }
    r.offsets[e + 1] = static_cast<int64_t>(r.source.size());
  }
  return r;
}

void balance_by_choices(ExpertRouting& r, const std::vector<double>& routed, int64_t tokens) {
  const int64_t E = r.experts;
  r.choice_share.assign(static_cast<size_t>(E), 0.0);
  r.balance = 0;
  for (int64_t e = 0; e < E; ++e) {
    r.choice_share[e] = routed[e] / static_cast<double>(tokens * r.k);
    r.balance += static_cast<double>(E) * r.probs_mean[e] * r.choice_share[e];
  }
}

std::vector<double> route_backward(const MoeConfig& moe, const ExpertRouting& r,
                                   const std::vector<double>& logits,
                                   const std::vector<double>& d_gate, double loss_weight) {
  const int64_t N = r.tokens, E = r.experts, k = r.k;
  std::vector<double> d_logits(static_cast<size_t>(N * E), 0.0);
  if (N == 0) return d_logits;
  // d balance / d p[n, e] is the same for every token.
  std::vector<double> d_probs(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    d_probs[e] = loss_weight * moe.aux_loss_coeff * static_cast<double>(E) * r.choice_share[e] /
                 static_cast<double>(N);
  std::vector<double> d_s(static_cast<size_t>(E)), p(static_cast<size_t>(E));
  for (int64_t n = 0; n < N; ++n) {
    const double* s = r.scores.data() + n * E;
    const double* dg = d_gate.data() + n * k;
    std::fill(d_s.begin(), d_s.end(), 0.0);
    // The gates: g_j = c s[e_j] / D, c moe.gate_scale, D the sum of the chosen scores when
    // normalising.
    double through_sum = 0;
    if (moe.normalize_top_k)
      for (int64_t j = 0; j < k; ++j) through_sum += dg[j] * r.gate[n * k + j];
    const double D = r.kept_sum[n];
    for (int64_t j = 0; j < k; ++j)
      d_s[r.choice[static_cast<size_t>(n * k + j)]] += (moe.gate_scale * dg[j] - through_sum) / D;
    // The balancing loss through the probabilities (sigmoid ones are normalised scores).
    const double sum = probabilities(moe, s, E, p.data());
    double through_probs = 0;
    if (sigmoid_scores(moe))
      for (int64_t e = 0; e < E; ++e) through_probs += d_probs[e] * p[e];
    for (int64_t e = 0; e < E; ++e) d_s[e] += (d_probs[e] - through_probs) / sum;
    // Scores to logits.
    double* dz = d_logits.data() + n * E;
    if (sigmoid_scores(moe)) {
      for (int64_t e = 0; e < E; ++e) dz[e] = d_s[e] * s[e] * (1 - s[e]);
    } else {
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += d_s[e] * s[e];
      for (int64_t e = 0; e < E; ++e) dz[e] = s[e] * (d_s[e] - dot);
    }
    // The z-loss: d lse^2 / dz = 2 lse softmax(z).
    if (moe.z_loss_coeff > 0) {
      const double* z = logits.data() + n * E;
      const double lse = log_sum_exp(z, E);
      const double c = loss_weight * moe.z_loss_coeff * 2 * lse / static_cast<double>(N);
      for (int64_t e = 0; e < E; ++e) dz[e] += c * std::exp(z[e] - lse);
    }
  }
  return d_logits;
}

void move_selection_bias(std::vector<double>& bias, const std::vector<int64_t>& routed, double rate) {
  const double mean = std::accumulate(routed.begin(), routed.end(), 0.0) / static_cast<double>(routed.size());
  for (size_t e = 0; e < bias.size(); ++e) {
    const double load = static_cast<double>(routed[e]);
    bias[e] += load < mean ? rate : load > mean ? -rate : 0.0;
  }
}

}  // namespace kiln
