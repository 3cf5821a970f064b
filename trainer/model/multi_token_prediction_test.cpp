// Multi-token prediction (model.mtp_depth) in the whole model: each depth's targets (k places
// ahead, masked past the row and across documents), the objective's gradients against finite
// differences, a packed document's depths equal to the document alone, full recomputation
// changing nothing, and data-parallel buckets' readiness. The PyTorch reference holds the
// modules' arithmetic (tests/torch_parity_test.cpp, mtp and mla_mtp).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "tests/model_gradients.h"
#include "tests/packed_documents.h"
#include "tests/small_model.h"
#include "trainer/model/gpt_model.h"

namespace kiln {
namespace {

constexpr double kMtpWeight = 0.3;

// A tiny Llama with two modules; with experts when moe, so that a module's block is an MoE
// layer (layer 2 and 3 of the placement).
ModelConfig mtp_model(bool moe = false) {
  ModelConfig m = test::small_model("llama", 16, 11, 6);
  m.make_vocab_size_divisible_by = 8;
  m.init_std = 0.3;
  m.mtp_depth = 2;
  m.mtp_loss_weight = kMtpWeight;
  if (moe) {
    m.moe.num_experts = 4;
    m.moe.top_k = 2;
    m.moe.dense_layers = 1;
    m.moe.aux_loss_coeff = 0.1;
    m.moe.z_loss_coeff = 0.05;
  }
  return m;
}

using PackedBatch = test::Batch2x6;

// What backward differentiates: the mean next-token loss plus weight / D x the depths' summed
// losses over the same count of targets, and every MoE layer's balancing and z losses (the
// modules' blocks' among them), weighted as the model weighs them (moe_model_test.cpp).
double mtp_objective(GptModel& model) {
  const double main = model.forward();
  const ModelConfig& m = model.config();
  const double targets = static_cast<double>(model.target_count());
  double depths = 0;
  for (double sum : model.mtp_loss_sums()) depths += sum;
  double routers = 0;
  for (int l = 0; l < m.block_count(); ++l)
    if (const MoeMlp* experts = model.experts(l)) {
      const RouterLosses r = experts->router_losses(model.ops(), 0);
      routers += m.moe.aux_loss_coeff * r.balance + m.moe.z_loss_coeff * r.z;
    }
  return main + kMtpWeight / m.mtp_depth * depths / targets + 12.0 / targets * routers;
}

TEST(MultiTokenPrediction, EachDepthsTargetsLieKPlacesAheadWithinTheRowAndTheDocument) {
  auto ops = make_cpu_ops(1);
  GptModel model(mtp_model(), 2, *ops);
  model.init_parameters(7);
  const PackedBatch batch;
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  // Depth 1 reads targets 1..5 of each row (row 1's target 2 masked), depth 2 targets 2..5.
  EXPECT_EQ(model.mtp_target_counts(), (std::vector<int64_t>{9, 7}));
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6, 0, {batch.positions.data(), batch.starts.data()});
  // Only pairs in one document: row 0's (0,1) (1,2) (3,4) (4,5), row 1's (1,2)x (2,3) (3,4)
  // (4,5) at depth 1; row 0's (0,2) (3,5), row 1's (1,3) (2,4) (3,5) at depth 2.
  EXPECT_EQ(model.mtp_target_counts(), (std::vector<int64_t>{7, 5}));
}

TEST(MultiTokenPrediction, GradientsOfTheObjectiveMatchFiniteDifferences) {
  for (const bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "an MoE block in each module" : "dense");
    auto ops = make_cpu_ops(2);
    GptModel model(mtp_model(moe), 2, *ops, DType::F64);
    model.init_parameters(7);
    const PackedBatch batch;
    model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6, 0,
                    {batch.positions.data(), batch.starts.data()});
    model.zero_grad();
    model.forward();
    model.backward(1.0 / static_cast<double>(model.target_count()));
    EXPECT_LT(test::expect_gradients_match_finite_differences(model, [&] { return mtp_objective(model); }), 1e-5);
  }
}

// The second document of a packed row, after both resets, has the depths' losses and the
// parameter gradients it has alone: no depth reads across the boundary.
TEST(MultiTokenPrediction, APackedDocumentsDepthsMatchItAlone) {
  ModelConfig m = mtp_model();
  m.seq_len = 12;
  auto ops = make_cpu_ops(2);
  GptModel packed(m, 1, *ops, DType::F64), alone(m, 1, *ops, DType::F64);
  packed.init_parameters(5);
  alone.init_parameters(5);
  const test::PackedDocuments row;
  packed.set_batch(row.tokens.data(), row.targets.data(), 1, 12, 0, {row.positions.data(), row.starts.data()});
  alone.set_batch(row.second.data(), row.second_targets.data(), 1, 7);
  for (GptModel* model : {&packed, &alone}) {
    model->zero_grad();
    model->forward();
  }
  EXPECT_EQ(packed.mtp_target_counts(), alone.mtp_target_counts());
  for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(packed.mtp_loss_sums()[k], alone.mtp_loss_sums()[k], 1e-12);
  for (GptModel* model : {&packed, &alone}) model->backward(1.0 / 7);
  for (size_t i = 0; i < packed.parameters().all().size(); ++i) {
    const Parameter& p = packed.parameters().all()[i];
    const double* g = p.grad.as<double>();
    const double* w = alone.parameters().all()[i].grad.as<double>();
    for (int64_t j = 0; j < p.grad.numel(); ++j) ASSERT_NEAR(g[j], w[j], 1e-12) << p.name << "[" << j << "]";
  }
}

// The modules' blocks re-run their forward before their backward, as the layers' do: the
// gradients are those of the run that kept the activations, bit for bit.
TEST(MultiTokenPrediction, FullRecomputationChangesNothing) {
  auto ops = make_cpu_ops(2);
  const PackedBatch batch;
  const auto gradients = [&](Recompute recompute) {
    ModelSplit split;
    split.recompute = recompute;
    GptModel model(mtp_model(true), 2, *ops, DType::F32, 0, 1, split);
    model.init_parameters(7);
    model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6, 0,
                    {batch.positions.data(), batch.starts.data()});
    model.zero_grad();
    model.forward();
    model.backward(1.0);
    const Tensor grads = model.parameters().flat_grads();
    return std::vector<float>(grads.as<float>(), grads.as<float>() + grads.numel());
  };
  EXPECT_EQ(gradients(Recompute::Full), gradients(Recompute::None));
}

TEST(MultiTokenPrediction, GradientsReportedReadyNeverChangeAgain) {
  // The modules' parameters lie with the output layer's, final once the head's part of
  // backward reports; the embedding, which the modules also read, stays last.
  auto ops = make_cpu_ops(2);
  GptModel model(mtp_model(), 2, *ops);
  model.init_parameters(7);
  const PackedBatch batch;
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  const std::vector<int64_t> reported = test::expect_reported_gradients_stay(model);
  ASSERT_EQ(reported.size(), 3u);
  EXPECT_GT(model.parameters().find("mtp.1.eh_proj.weight").offset, 0);
  EXPECT_LT(model.parameters().find("mtp.1.eh_proj.weight").offset, reported[0]);
}

}  // namespace
}  // namespace kiln
