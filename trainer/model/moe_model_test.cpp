// Models with mixture-of-experts layers: the whole model's gradients, the balancing and z
// losses included, against central finite differences in double precision (GPT-2 and Llama
// experts, shared experts, a capacity that drops choices, padding, sigmoid scores, explicit
// MoE layers); a tiny fp32 MoE model that overfits one batch; and the decoder's logits equal
// to the full forward's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/model_gradients.h"
#include "tests/small_model.h"
#include "trainer/model/gpt_decoder.h"
#include "trainer/model/gpt_model.h"

namespace kiln {
namespace {

ModelConfig moe_model(const std::string& arch) {
  ModelConfig m = test::small_model(arch, 16, 11, 6);
  m.make_vocab_size_divisible_by = 8;
  m.init_std = 0.3;
  m.moe.num_experts = 4;
  m.moe.top_k = 2;
  m.moe.ffn_hidden = 12;
  m.moe.aux_loss_coeff = 0.1;
  m.moe.z_loss_coeff = 0.05;
  return m;
}

const std::vector<int32_t> kTokens = {1, 4, 2, 9, 10, 3, 0, 5, 5, 7, 8, 2};
const std::vector<int32_t> kTargets = {4, 2, 9, 10, 3, 6, 5, 5, -1, 8, 2, 1};

// The loss the gradients are of: the language-model loss plus, per MoE layer, its balancing
// and z losses at their coefficients, weighted by the batch's tokens over its targets (the
// model weighs each target by 1 / targets, and these losses are means over all tokens).
double objective(GptModel& model) {
  const double lm = model.forward();
  const ModelConfig& m = model.config();
  const double weight = 12.0 / static_cast<double>(model.target_count());
  double extra = 0;
  for (int l = 0; l < m.n_layer; ++l)
    if (const MoeMlp* experts = model.experts(l)) {
      const RouterLosses r = experts->router_losses(model.ops(), 0);
      extra += m.moe.aux_loss_coeff * r.balance + m.moe.z_loss_coeff * r.z;
    }
  return lm + weight * extra;
}

void expect_gradients_match(const ModelConfig& config) {
  auto ops = make_cpu_ops(2);
  GptModel model(config, 2, *ops, DType::F64);
  model.init_parameters(7);
  model.set_batch(kTokens.data(), kTargets.data(), 2, 6);
  model.zero_grad();
  model.forward();
  model.backward(1.0 / static_cast<double>(model.target_count()));
  test::expect_gradients_match_finite_differences(model, [&] { return objective(model); });
}

class MoeModel : public testing::TestWithParam<std::string> {};

TEST_P(MoeModel, GradientsMatchFiniteDifferences) { expect_gradients_match(moe_model(GetParam())); }

TEST_P(MoeModel, SharedExpertsAndSigmoidScores) {
  ModelConfig m = moe_model(GetParam());
  m.moe.shared_experts = 1;
  m.moe.score = "sigmoid";
  expect_gradients_match(m);
}

TEST_P(MoeModel, ACapacityThatDropsChoicesWithPadding) {
  ModelConfig m = moe_model(GetParam());
  m.moe.capacity_factor = 0.75;  // 12 tokens x 2 / 4 x 0.75: 5 rows an expert
  m.moe.pad_to_capacity = true;
  expect_gradients_match(m);
}

// The experts' grouped products and the shared experts' wait for the weight pass
// (tests/model_gradients.h), and so do the routers'.
TEST_P(MoeModel, ASplitBackwardAddsWhatTheWholeOneAdds) {
  ModelConfig m = moe_model(GetParam());
  m.moe.shared_experts = 1;
  std::vector<int32_t> reversed = kTokens;
  std::reverse(reversed.begin(), reversed.end());
  test::expect_split_backward_adds_what_the_whole_one_adds(m, [&](GptModel& model) {
    model.set_batch(kTokens.data(), kTargets.data(), 2, 6, 0);
    model.set_batch(reversed.data(), kTargets.data(), 2, 6, 1);
  });
}

TEST_P(MoeModel, OnlyTheListedLayersHaveExperts) {
  ModelConfig m = moe_model(GetParam());
  m.moe.layers = "1";
  auto ops = make_cpu_ops(1);
  GptModel model(m, 2, *ops, DType::F64);
  EXPECT_EQ(model.experts(0), nullptr);
  EXPECT_NE(model.experts(1), nullptr);
  expect_gradients_match(m);
}

TEST_P(MoeModel, OverfitsOneBatchAndCountsItsChoices) {
  auto ops = make_cpu_ops(2);
  ModelConfig m = moe_model(GetParam());
  m.init_std = 0.02;
  m.d_model = 32;
  GptModel model(m, 2, *ops);
  model.init_parameters(1);
  model.set_batch(kTokens.data(), kTargets.data(), 2, 6);
  EXPECT_LT(test::train_on_its_batch(model, *ops, 150), 0.1);
  const ExpertLoadSum load = model.experts(0)->take_load(*ops);
  EXPECT_EQ(load.micro_batches, 150);
  int64_t routed = 0;
  for (int64_t c : load.routed) routed += c;
  EXPECT_EQ(routed, 150 * 12 * 2);
  EXPECT_GT(load.entropy / load.micro_batches, 0.0);
  EXPECT_EQ(model.experts(0)->take_load(*ops).micro_batches, 0);
}

TEST_P(MoeModel, TheDecoderGivesTheFullForwardsLogits) {
  auto ops = make_cpu_ops(1);
  ModelConfig m = moe_model(GetParam());
  m.moe.shared_experts = 1;
  GptModel model(m, 1, *ops, DType::F64);
  model.init_parameters(5);
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9};
  model.set_batch(tokens.data(), nullptr, 1, 6);
  model.forward();
  std::vector<float> want, got;
  model.logits_row(5, want);
  GptDecoder decoder(model, 1, 4);
  decoder.feed(tokens.data(), 6);
  decoder.logits(0, got);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(MoeBalancing, TheSelectionBiasMovesTowardsTheMeanLoad) {
  std::vector<double> bias = {0.5, 0.0, 0.0, 0.0};
  move_selection_bias(bias, {10, 2, 6, 6}, 0.01);
  EXPECT_EQ(bias, (std::vector<double>{0.49, 0.01, 0.0, 0.0}));
}

INSTANTIATE_TEST_SUITE_P(Arch, MoeModel, testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace kiln
