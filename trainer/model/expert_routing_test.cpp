// The router's decisions on small cases worked by hand (top-k, normalisation, capacity and
// its drop policies, padding, the selection bias, group-limited routing, the balancing loss),
// and its gradient against central finite differences of the same function, all through the
// CPU's routing ops in double precision (the reference kernels/cuda's are held to).
#include "trainer/model/expert_routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "kernels/ops.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

MoeConfig experts(int E, int k) {
  MoeConfig moe;
  moe.num_experts = E;
  moe.top_k = k;
  return moe;
}

template <typename V>
Tensor over(std::vector<V>& values, DType dtype) {
  return Tensor{values.data(), dtype, {static_cast<int64_t>(values.size())}};
}

// One micro-batch of N tokens routed by the CPU's ops, read back.
struct Routed {
  ExpertRoute rule;
  int64_t tokens = 0;
  std::vector<int32_t> choice, row, source, offsets;
  std::vector<double> logits, gate, row_gate, stats, counts;
  std::vector<int64_t> routed, dropped;
  double balance = 0, entropy = 0, z = 0;
};

std::unique_ptr<Ops>& cpu() {
  static std::unique_ptr<Ops> ops = make_cpu_ops(1);
  return ops;
}

// The router logits' gradient from the gates' d_gate [N, k] and the losses at their
// coefficients times loss_weight, the balancing loss weighing `shares` of `tokens` tokens
// (those of r's own when not given); balance, when given, += the balancing loss (the op's tally).
std::vector<double> route_gradient(const MoeConfig& moe, Routed& r, std::vector<double> d_gate, double loss_weight,
                                   std::vector<double> shares = {}, int64_t tokens = 0, double* balance = nullptr) {
  const int64_t E = r.rule.experts, k = r.rule.top_k;
  if (shares.empty()) shares.assign(r.counts.begin(), r.counts.begin() + E);
  std::vector<double> d_logits(static_cast<size_t>(r.tokens * E)), tally{0.0, 0.0};
  const RouteLoss loss{tokens > 0 ? tokens : r.tokens, loss_weight * moe.aux_loss_coeff, loss_weight * moe.z_loss_coeff};
  Tensor logits = over(r.logits, DType::F64);
  logits.shape = {r.tokens, E};
  Tensor dz = over(d_logits, DType::F64);
  dz.shape = logits.shape;
  Tensor choice = over(r.choice, DType::I32), dg = over(d_gate, DType::F64);
  choice.shape = dg.shape = {r.tokens, k};
  cpu()->route_backward(dz, balance ? over(tally, DType::F64) : Tensor{}, dg, logits, choice, over(r.stats, DType::F64),
                        over(shares, DType::F64), r.rule, loss);
  if (balance) {
    EXPECT_EQ(tally[1], 1.0) << "one micro-batch counted";
    *balance += tally[0];
  }
  return d_logits;
}

Routed route_tokens(const MoeConfig& moe, std::vector<double> logits, int64_t N, std::vector<double> bias) {
  Routed r;
  r.rule = route_rule(moe, N);
  r.tokens = N;
  r.logits = std::move(logits);
  const int64_t E = moe.num_experts, k = moe.top_k, M = r.rule.most_rows(N);
  r.choice.resize(static_cast<size_t>(N * k));
  r.row.resize(static_cast<size_t>(N * k));
  r.gate.resize(static_cast<size_t>(N * k));
  r.stats.resize(static_cast<size_t>(E + 2));
  r.counts.resize(static_cast<size_t>(2 * E));
  r.offsets.resize(static_cast<size_t>(E + 1));
  r.source.resize(static_cast<size_t>(M));
  r.row_gate.resize(static_cast<size_t>(M));
  Tensor logits_t = over(r.logits, DType::F64);
  logits_t.shape = {N, E};
  Tensor choice = over(r.choice, DType::I32), gate = over(r.gate, DType::F64), row = over(r.row, DType::I32);
  choice.shape = gate.shape = row.shape = {N, k};
  cpu()->route_tokens(choice, gate, over(r.stats, DType::F64), logits_t, over(bias, DType::F64), r.rule);
  cpu()->route_rows(row, over(r.source, DType::I32), over(r.row_gate, DType::F64), over(r.offsets, DType::I32),
                    over(r.counts, DType::F64), choice, gate, r.rule);
  r.source.resize(static_cast<size_t>(r.offsets.back()));
  r.row_gate.resize(r.source.size());
  for (int64_t e = 0; e < E; ++e) {
    r.routed.push_back(std::llround(r.counts[static_cast<size_t>(e)]));
    r.dropped.push_back(std::llround(r.counts[static_cast<size_t>(E + e)]));
  }
  r.entropy = r.stats[static_cast<size_t>(E)];
  r.z = r.stats[static_cast<size_t>(E + 1)];
  route_gradient(moe, r, std::vector<double>(static_cast<size_t>(N * k), 0.0), 1.0, {}, 0, &r.balance);
  return r;
}

TEST(ExpertRouting, TopTwoOfThreeByHand) {
  const MoeConfig moe = experts(3, 2);
  // softmax = 1/6, 2/6, 3/6
  const Routed r = route_tokens(moe, {0.0, std::log(2.0), std::log(3.0)}, 1, std::vector<double>(3, 0.0));
  EXPECT_EQ(r.choice, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(r.gate[0], 3.0 / 5, 1e-12);
  EXPECT_NEAR(r.gate[1], 2.0 / 5, 1e-12);
  // Expert 1 first, then expert 2: rows in expert order.
  EXPECT_EQ(r.row, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(r.source, (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 0, 1, 2}));
  EXPECT_EQ(r.routed, (std::vector<int64_t>{0, 1, 1}));
  // E / (N^2 k) * sum P_e c_e = 3 / 2 * (2/6 + 3/6)
  EXPECT_NEAR(r.balance, 1.25, 1e-12);
  const double entropy = -(std::log(1.0 / 6) / 6 + 2 * std::log(2.0 / 6) / 6 + 3 * std::log(3.0 / 6) / 6);
  EXPECT_NEAR(r.entropy, entropy, 1e-12);
  EXPECT_NEAR(r.z, std::pow(std::log(6.0), 2), 1e-12);
}

// Four tokens that all prefer expert 0, with decreasing scores for it.
std::vector<double> crowded_logits() { return {4.0, 0.0, 3.0, 0.0, 5.0, 0.0, 2.0, 0.0}; }

TEST(ExpertRouting, OverCapacityTheLowestScoresAreDropped) {
  MoeConfig moe = experts(2, 1);
  moe.normalize_top_k = false;
  moe.capacity_factor = 1.0;  // ceil(4 tokens * 1 / 2) = 2 each
  EXPECT_EQ(expert_capacity(moe, 4), 2);
  const Routed r = route_tokens(moe, crowded_logits(), 4, {0.0, 0.0});
  EXPECT_EQ(r.routed, (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(r.dropped, (std::vector<int64_t>{2, 0}));
  // Tokens 2 (logit 5) and 0 (logit 4) are kept, in token order.
  EXPECT_EQ(r.source, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(r.row, (std::vector<int32_t>{0, -1, 1, -1}));
}

TEST(ExpertRouting, OverCapacityTheLatestTokensAreDroppedByPosition) {
  MoeConfig moe = experts(2, 1);
  moe.capacity_factor = 1.0;
  moe.drop_policy = "position";
  const Routed r = route_tokens(moe, crowded_logits(), 4, {0.0, 0.0});
  EXPECT_EQ(r.source, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(r.row, (std::vector<int32_t>{0, 1, -1, -1}));
}

TEST(ExpertRouting, PaddingGivesEveryExpertItsCapacity) {
  MoeConfig moe = experts(2, 1);
  moe.capacity_factor = 1.5;  // ceil(1.5 * 4 / 2) = 3
  moe.pad_to_capacity = true;
  EXPECT_EQ(max_expert_rows(moe, 4), 6);
  const Routed r = route_tokens(moe, crowded_logits(), 4, {0.0, 0.0});
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 3, 6}));
  EXPECT_EQ(r.source, (std::vector<int32_t>{0, 1, 2, -1, -1, -1}));
  EXPECT_EQ(r.row_gate[3], 0.0);
}

TEST(ExpertRouting, AnExpertParallelRankReceivesAtMostItsExpertsShare) {
  // 8 experts over 4 ranks, top 4 of 8: a token sends each rank at most its 2 experts' rows.
  MoeConfig moe = experts(8, 4);
  EXPECT_EQ(max_received_expert_rows(moe, 10, 4), 4 * 10 * 2);
  EXPECT_EQ(max_received_expert_rows(moe, 10, 1), max_expert_rows(moe, 10));
  // A capacity of ceil(1.0 * 10 * 4 / 8) = 5 rows per expert from each rank.
  moe.capacity_factor = 1.0;
  EXPECT_EQ(max_received_expert_rows(moe, 10, 4), 4 * 2 * 5);
  moe.top_k = 1;  // 10 rows at most, but 2 experts x a capacity of ceil(10 / 8) = 2 keep 4
  EXPECT_EQ(max_received_expert_rows(moe, 10, 4), 4 * 2 * 2);
  moe.pad_to_capacity = true;
  EXPECT_EQ(max_received_expert_rows(moe, 10, 4), 4 * 2 * 2);
}

TEST(ExpertRouting, TheSelectionBiasChoosesButNeverWeighs) {
  MoeConfig moe = experts(2, 1);
  moe.normalize_top_k = false;
  const Routed r = route_tokens(moe, {1.0, 0.0}, 1, {0.0, 0.5});
  EXPECT_EQ(r.choice[0], 1);  // 0.269 + 0.5 beats 0.731
  EXPECT_NEAR(r.gate[0], 1.0 / (1.0 + std::exp(1.0)), 1e-12);
}

// Four experts in two groups ({0, 1}, {2, 3}), each token's two experts from its best group,
// a group scored by the sum of its top_k / route_groups_topk = 2 best selection scores.
MoeConfig two_groups() {
  MoeConfig moe = experts(4, 2);
  moe.route_groups = 2;
  moe.route_groups_topk = 1;
  return moe;
}

TEST(ExpertRouting, GroupLimitedRoutingChoosesFromTheBestGroupsOnly) {
  // Softmax scores 0.30, 0.01, 0.2, 0.2 (over their sum): the best two experts are 0 and 2,
  // but group {2, 3} scores 0.4 against 0.31, so the token takes 2 and 3.
  const std::vector<double> logits = {std::log(0.30), std::log(0.01), std::log(0.2), std::log(0.2)};
  const std::vector<double> none(4, 0.0);
  EXPECT_EQ(route_tokens(experts(4, 2), logits, 1, none).choice, (std::vector<int32_t>{0, 2}));
  const Routed grouped = route_tokens(two_groups(), logits, 1, none);
  EXPECT_EQ(grouped.choice, (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(grouped.gate[0], 0.5, 1e-12);
  MoeConfig scaled = two_groups();
  scaled.gate_scale = 2.5;  // DeepSeek-V3's routed_scaling_factor
  EXPECT_NEAR(route_tokens(scaled, logits, 1, none).gate[1], 1.25, 1e-12);
  EXPECT_EQ(grouped.offsets, (std::vector<int32_t>{0, 0, 0, 1, 2}));
  // The selection bias scores the groups too, and still never weighs: +0.3 on expert 1 lifts
  // group {0, 1} to 0.31 / 0.71 + 0.3 = 0.737 against 0.563.
  const Routed biased = route_tokens(two_groups(), logits, 1, {0.0, 0.3, 0.0, 0.0});
  EXPECT_EQ(biased.choice, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(biased.gate[0], 0.30 / 0.31, 1e-12);
}

TEST(ExpertRouting, GroupLimitedRoutingOverEveryGroupIsPlainTopK) {
  // Eight sigmoid-scored experts in four groups of two, with a selection bias.
  const auto grouped = [](int k, int groups_topk) {
    MoeConfig moe = experts(8, k);
    moe.score = "sigmoid";
    moe.route_groups = 4;
    moe.route_groups_topk = groups_topk;
    return moe;
  };
  const auto plain = [&](int k) {
    MoeConfig moe = grouped(k, 1);
    moe.route_groups = 1;  // the same experts and scores, unlimited
    return moe;
  };
  Random rng(11);
  std::vector<double> logits(16 * 8), bias(8);
  for (double& z : logits) z = rng.normal();
  for (double& b : bias) b = 0.1 * rng.normal();
  EXPECT_EQ(route_tokens(grouped(4, 4), logits, 16, bias).choice, route_tokens(plain(4), logits, 16, bias).choice)
      << "every group: no limit";
  // Two experts from two of four groups, a group scored by its best expert: the group of the
  // token's best expert is always one of them.
  const Routed limited = route_tokens(grouped(2, 2), logits, 16, bias);
  const Routed free = route_tokens(plain(2), logits, 16, bias);
  for (int64_t n = 0; n < 16; ++n) {
    EXPECT_EQ(limited.choice[n * 2], free.choice[n * 2]) << "token " << n;
  }
  // One group, scored by the sum of its two: both choices from it.
  const Routed one = route_tokens(grouped(2, 1), logits, 16, bias);
  for (int64_t n = 0; n < 16; ++n) {
    EXPECT_EQ(one.choice[n * 2] / 2, one.choice[n * 2 + 1] / 2) << "token " << n;
  }
}

// sum over kept choices of w * gate, plus the losses at their coefficients times loss_weight.
double objective(const MoeConfig& moe, const std::vector<double>& logits, int64_t N,
                 const std::vector<double>& w, double loss_weight) {
  const Routed r = route_tokens(moe, logits, N, std::vector<double>(moe.num_experts, 0.0));
  double f = 0;
  for (size_t i = 0; i < r.gate.size(); ++i)
    if (r.row[i] >= 0) f += w[i] * r.gate[i];
  return f + loss_weight * (moe.aux_loss_coeff * r.balance + moe.z_loss_coeff * r.z);
}

void expect_gradient(MoeConfig moe) {
  const int64_t N = 6, E = moe.num_experts, k = moe.top_k;
  Random rng(7);
  std::vector<double> logits(N * E), w(N * k);
  for (double& z : logits) z = rng.normal();
  for (double& v : w) v = rng.normal();
  const double loss_weight = 0.7;
  Routed r = route_tokens(moe, logits, N, std::vector<double>(E, 0.0));
  std::vector<double> d_gate(N * k);
  for (size_t i = 0; i < d_gate.size(); ++i) d_gate[i] = r.row[i] >= 0 ? w[i] : 0.0;
  const std::vector<double> grad = route_gradient(moe, r, d_gate, loss_weight);
  for (size_t i = 0; i < logits.size(); ++i) {
    const double h = 1e-6;
    std::vector<double> up = logits, down = logits;
    up[i] += h;
    down[i] -= h;
    const double numeric =
        (objective(moe, up, N, w, loss_weight) - objective(moe, down, N, w, loss_weight)) / (2 * h);
    EXPECT_NEAR(grad[i], numeric, 1e-7 * (1 + std::abs(numeric))) << "logit " << i;
  }
}

TEST(ExpertRouting, GradientMatchesFiniteDifferences) {
  for (const char* score : {"softmax", "sigmoid"}) {
    for (bool normalize : {true, false}) {
      MoeConfig moe = experts(5, 2);
      moe.score = score;
      moe.normalize_top_k = normalize;
      moe.aux_loss_coeff = 0.3;
      moe.z_loss_coeff = 0.2;
      SCOPED_TRACE(std::string(score) + (normalize ? " normalised" : ""));
      expect_gradient(moe);
    }
  }
  MoeConfig dropping = experts(3, 2);
  dropping.capacity_factor = 0.5;
  SCOPED_TRACE("with drops");
  expect_gradient(dropping);
  // DeepSeek-V3's: sigmoid scores, normalised, scaled by 2.5, chosen from the better of two groups.
  MoeConfig deepseek = experts(6, 2);
  deepseek.score = "sigmoid";
  deepseek.gate_scale = 2.5;
  deepseek.route_groups = 2;
  deepseek.aux_loss_coeff = 0.3;
  SCOPED_TRACE("scaled gates from groups");
  expect_gradient(deepseek);
  deepseek.normalize_top_k = false;
  SCOPED_TRACE("scaled gates, not normalised");
  expect_gradient(deepseek);
}

TEST(ExpertRouting, SharesOfAMicroBatchBalanceAsTheWhole) {
  // Two tensor ranks route halves of 8 tokens; with the whole micro-batch's choices their
  // balancing losses average, and their logits' gradients concatenate, to the whole's.
  MoeConfig moe = experts(4, 2);
  moe.aux_loss_coeff = 0.5;
  const int64_t N = 8, E = 4, k = 2, half = N / 2;
  Random rng(3);
  std::vector<double> logits(N * E), d_gate(N * k);
  for (double& z : logits) z = rng.normal();
  for (double& g : d_gate) g = rng.normal();
  const std::vector<double> no_bias(E, 0.0);
  Routed whole = route_tokens(moe, logits, N, no_bias);
  const std::vector<double> want = route_gradient(moe, whole, d_gate, 0.25 * N);
  const std::vector<double> routed(whole.counts.begin(), whole.counts.begin() + E);
  double balance = 0;
  for (int64_t part = 0; part < 2; ++part) {
    const std::vector<double> z(logits.begin() + part * half * E, logits.begin() + (part + 1) * half * E);
    const std::vector<double> dg(d_gate.begin() + part * half * k, d_gate.begin() + (part + 1) * half * k);
    Routed share = route_tokens(moe, z, half, no_bias);
    double share_balance = 0;
    const std::vector<double> got = route_gradient(moe, share, dg, 0.25 * half, routed, N, &share_balance);
    balance += share_balance / 2;
    for (int64_t i = 0; i < half * E; ++i)
      EXPECT_NEAR(got[i], want[part * half * E + i], 1e-14) << "part " << part << ", logit " << i;
  }
  EXPECT_NEAR(balance, whole.balance, 1e-14);
  // On its own, a share's balance is its own, not the whole's.
  const std::vector<double> first(logits.begin(), logits.begin() + half * E);
  EXPECT_GT(std::abs(route_tokens(moe, first, half, no_bias).balance - whole.balance), 1e-3);
}

}  // namespace
}  // namespace kiln
