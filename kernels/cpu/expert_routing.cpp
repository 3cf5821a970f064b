// The router of an MoE layer (ops.h: route_tokens, route_rows, route_backward; the rule in
// kernels/expert_route.h): the reference the GPU's kernels are held to. Every sum runs in
// double, token by token in order, on one thread: routing is a sliver of a layer's work and
// this way its results never depend on the thread count.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

namespace {

// A token's scores s [E] from its logits z; returns logsumexp(z).
template <typename T>
double token_scores(const ExpertRoute& route, const T* z, double* s) {
  const int64_t E = route.experts;
  const double top = static_cast<double>(*std::max_element(z, z + E));
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(z[e]) - top);
  const double lse = top + std::log(sum);
  for (int64_t e = 0; e < E; ++e)
    s[e] = route.sigmoid ? 1.0 / (1.0 + std::exp(-static_cast<double>(z[e]))) : std::exp(static_cast<double>(z[e]) - lse);
  return lse;
}

// The divisor that turns scores into routing probabilities: their sum for sigmoid scores (1
// for softmax ones, which already are).
double probability_divisor(const ExpertRoute& route, const double* s) {
  return route.sigmoid ? std::accumulate(s, s + route.experts, 0.0) : 1.0;
}

// The sum of the chosen scores the gates are divided by (1 unnormalised).
double kept_sum(const ExpertRoute& route, const double* s, const int32_t* chosen) {
  double kept = 0;
  for (int64_t j = 0; j < route.top_k; ++j) kept += s[chosen[j]];
  return route.normalize ? kept : 1.0;
}

// Group-limited routing's working space, kept between tokens so that a token allocates nothing.
struct GroupScratch {
  std::vector<double> score, mine;  // each group's score; one group's selection values
  std::vector<int32_t> order;       // the groups, best first
};

// The experts a token may choose, into `candidates` (their count returned): every expert, or
// those of its groups_topk best groups (the rule's group-limited routing). value [E]: s + bias.
int64_t selectable_experts(const ExpertRoute& route, const std::vector<double>& value, std::vector<int32_t>& candidates,
                           GroupScratch& scratch) {
  const int64_t E = route.experts, G = route.groups, per_group = route.group_size();
  if (G == 1) {
    std::iota(candidates.begin(), candidates.end(), 0);
    return E;
  }
  const int64_t best = route.top_k / route.groups_topk;
  scratch.score.resize(static_cast<size_t>(G));
  scratch.mine.resize(static_cast<size_t>(per_group));
  for (int64_t g = 0; g < G; ++g) {
    std::copy_n(value.begin() + g * per_group, per_group, scratch.mine.begin());
    std::partial_sort(scratch.mine.begin(), scratch.mine.begin() + best, scratch.mine.end(), std::greater<double>());
    scratch.score[static_cast<size_t>(g)] = std::accumulate(scratch.mine.begin(), scratch.mine.begin() + best, 0.0);
  }
  std::vector<int32_t>& groups = scratch.order;
  groups.resize(static_cast<size_t>(G));
  std::iota(groups.begin(), groups.end(), 0);
  std::partial_sort(groups.begin(), groups.begin() + route.groups_topk, groups.end(), [&](int32_t a, int32_t b) {
    return scratch.score[a] != scratch.score[b] ? scratch.score[a] > scratch.score[b] : a < b;
  });
  std::sort(groups.begin(), groups.begin() + route.groups_topk);
  int64_t count = 0;
  for (int64_t i = 0; i < route.groups_topk; ++i)
    for (int64_t e = groups[static_cast<size_t>(i)] * per_group; e < (groups[static_cast<size_t>(i)] + 1) * per_group; ++e)
      candidates[static_cast<size_t>(count++)] = static_cast<int32_t>(e);
  return count;
}

}  // namespace

template <typename T>
void route_tokens(int32_t* choice, T* gate, T* stats, const T* logits, const T* bias, int64_t N,
                  const ExpertRoute& route) {
  const int64_t E = route.experts, k = route.top_k;
  std::vector<double> s(static_cast<size_t>(E)), value(static_cast<size_t>(E)), probs(static_cast<size_t>(E), 0.0);
  std::vector<int32_t> order(static_cast<size_t>(E));
  GroupScratch groups;
  double entropy = 0, z = 0;
  for (int64_t n = 0; n < N; ++n) {
    const double lse = token_scores(route, logits + n * E, s.data());
    for (int64_t e = 0; e < E; ++e) value[e] = s[e] + static_cast<double>(bias[e]);
    const int64_t candidates = selectable_experts(route, value, order, groups);
    std::partial_sort(order.begin(), order.begin() + k, order.begin() + candidates, [&](int32_t a, int32_t b) {
      return value[a] != value[b] ? value[a] > value[b] : a < b;
    });
    const double kept = kept_sum(route, s.data(), order.data());
    for (int64_t j = 0; j < k; ++j) {
      choice[n * k + j] = order[j];
      gate[n * k + j] = static_cast<T>(route.gate_scale * s[order[j]] / kept);
    }
    const double divisor = probability_divisor(route, s.data());
    double mine = 0;
    for (int64_t e = 0; e < E; ++e) {
      const double p = s[e] / divisor;
      probs[e] += p;
      if (p > 0) mine -= p * std::log(p);
    }
    entropy += mine / static_cast<double>(N);
    z += lse * lse / static_cast<double>(N);
  }
  for (int64_t e = 0; e < E; ++e) stats[e] = static_cast<T>(probs[e]);
  stats[E] = static_cast<T>(entropy);
  stats[E + 1] = static_cast<T>(z);
}

template <typename T>
void route_rows(int32_t* row, int32_t* source, T* row_gate, int32_t* offsets, T* counts, const int32_t* choice,
                const T* gate, int64_t N, const ExpertRoute& route) {
  const int64_t E = route.experts, k = route.top_k, capacity = route.capacity;
  // Each expert's choices in choice order; over capacity, the lowest gates (or the latest
  // choices) are dropped.
  std::vector<std::vector<int64_t>> picked(static_cast<size_t>(E));
  for (int64_t i = 0; i < N * k; ++i) picked[static_cast<size_t>(choice[i])].push_back(i);
  std::fill(row, row + N * k, -1);
  int64_t rows = 0;
  offsets[0] = 0;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<int64_t>& mine = picked[static_cast<size_t>(e)];
    counts[e] = static_cast<T>(mine.size());
    counts[E + e] = T(0);
    if (capacity > 0 && static_cast<int64_t>(mine.size()) > capacity) {
      if (route.drop_by_gate)
        std::stable_sort(mine.begin(), mine.end(), [&](int64_t a, int64_t b) { return gate[a] > gate[b]; });
      counts[E + e] = static_cast<T>(static_cast<int64_t>(mine.size()) - capacity);
      mine.resize(static_cast<size_t>(capacity));
      std::sort(mine.begin(), mine.end());
    }
    for (int64_t i : mine) {
      row[i] = static_cast<int32_t>(rows);
      source[rows] = static_cast<int32_t>(i / k);
      row_gate[rows++] = gate[i];
    }
    if (route.pad)
      for (int64_t pad = static_cast<int64_t>(mine.size()); pad < capacity; ++pad) {
        source[rows] = -1;
        row_gate[rows++] = T(0);
      }
    offsets[e + 1] = static_cast<int32_t>(rows);
  }
}

template <typename T>
void route_backward(T* d_logits, T* tally, const T* d_gate, const T* logits, const int32_t* choice, const T* stats,
                    const T* shares, int64_t N, const ExpertRoute& route, const RouteLoss& loss) {
  const int64_t E = route.experts, k = route.top_k;
  if (N == 0) return;
  // d balance / d p[n, e] is the same for every token.
  std::vector<double> d_probs(static_cast<size_t>(E)), d_s(static_cast<size_t>(E)), s(static_cast<size_t>(E));
  double value = 0;
  for (int64_t e = 0; e < E; ++e) {
    const double share = static_cast<double>(shares[e]) / static_cast<double>(loss.tokens * k);
    d_probs[e] = loss.balance * static_cast<double>(E) * share / static_cast<double>(N);
    value += static_cast<double>(E) * (static_cast<double>(stats[e]) / static_cast<double>(N)) * share;
  }
  if (tally) {
    tally[0] = static_cast<T>(static_cast<double>(tally[0]) + value);
    tally[1] += T(1);
  }
  for (int64_t n = 0; n < N; ++n) {
    const T* z = logits + n * E;
    const int32_t* chosen = choice + n * k;
    const T* dg = d_gate + n * k;
    const double lse = token_scores(route, z, s.data());
    std::fill(d_s.begin(), d_s.end(), 0.0);
    // The gates: g_j = c s[e_j] / D, c the gate scale, D the sum of the chosen scores when
    // normalising.
    const double D = kept_sum(route, s.data(), chosen);
    double through_sum = 0;
    if (route.normalize)
      for (int64_t j = 0; j < k; ++j) through_sum += static_cast<double>(dg[j]) * (route.gate_scale * s[chosen[j]] / D);
    for (int64_t j = 0; j < k; ++j) d_s[chosen[j]] += (route.gate_scale * static_cast<double>(dg[j]) - through_sum) / D;
    // The balancing loss through the probabilities (sigmoid ones are normalised scores).
    const double divisor = probability_divisor(route, s.data());
    double through_probs = 0;
    if (route.sigmoid)
      for (int64_t e = 0; e < E; ++e) through_probs += d_probs[e] * (s[e] / divisor);
    for (int64_t e = 0; e < E; ++e) d_s[e] += (d_probs[e] - through_probs) / divisor;
    // Scores to logits, then the z-loss: d lse^2 / dz = 2 lse softmax(z).
    double dot = 0;
    for (int64_t e = 0; e < E; ++e) dot += d_s[e] * s[e];
    const double c = loss.z * 2 * lse / static_cast<double>(N);
    for (int64_t e = 0; e < E; ++e) {
      const double through_scores = route.sigmoid ? d_s[e] * s[e] * (1 - s[e]) : s[e] * (d_s[e] - dot);
      d_logits[n * E + e] = static_cast<T>(through_scores + c * std::exp(static_cast<double>(z[e]) - lse));
    }
  }
}

#define KILN_ROUTE(T)                                                                                              \
  template void route_tokens<T>(int32_t*, T*, T*, const T*, const T*, int64_t, const ExpertRoute&);             \
  template void route_rows<T>(int32_t*, int32_t*, T*, int32_t*, T*, const int32_t*, const T*, int64_t,          \
                              const ExpertRoute&);                                                              \
  template void route_backward<T>(T*, T*, const T*, const T*, const int32_t*, const T*, const T*, int64_t,      \
                                  const ExpertRoute&, const RouteLoss&);
KILN_ROUTE(float)
KILN_ROUTE(double)
#undef KILN_ROUTE

}  // namespace kiln::cpu
