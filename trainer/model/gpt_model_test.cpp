// The whole model's gradients against central finite differences, in double precision,
// for both architectures and Qwen3's normalised heads (plain, and with the document resets of
// rows that pack several documents); the defining property of those resets; and a tiny fp32 model that must
// overfit one batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/error_of.h"
#include "tests/model_gradients.h"
#include "tests/packed_documents.h"
#include "tests/small_model.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

// "qwen3": llama with the query and key heads normalised and 6 wide, not 16 / 4. "mla":
// llama with DeepSeek's latent attention (query heads of 3 + 4 turned by RoPE, value heads of
// 3); "mla_direct_q" without the query's latent (DeepSeek-V2-Lite's).
ModelConfig tiny_model(const std::string& arch) {
  const bool mla = arch.starts_with("mla");
  ModelConfig m = test::small_model(arch == "qwen3" || mla ? "llama" : arch, 16, 11, 6);
  if (arch == "qwen3") {
    m.qk_norm = true;
    m.explicit_head_dim = 6;
  }
  if (mla) test::use_latent_attention(m, arch == "mla" ? 6 : 0, 5, 3, 4, 3);
  m.make_vocab_size_divisible_by = 8;  // 11 -> 16: padding columns take part in nothing
  m.init_std = 0.3;                    // large enough that every path carries gradient
  return m;
}

using test::Batch2x6;

class ModelGradients : public testing::TestWithParam<std::string> {};

// The gradients of the loss over the batch the model holds against finite differences.
void expect_gradients_match_finite_differences(GptModel& model) {
  model.zero_grad();
  model.forward();
  model.backward(1.0 / static_cast<double>(model.target_count()));
  EXPECT_LT(test::expect_gradients_match_finite_differences(model, [&] { return model.forward(); }), 1e-5);
}

TEST_P(ModelGradients, MatchFiniteDifferences) {
  auto ops = make_cpu_ops(2);
  GptModel model(tiny_model(GetParam()), 2, *ops, DType::F64);
  model.init_parameters(7);
  const Batch2x6 batch;
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  expect_gradients_match_finite_differences(model);
  SCOPED_TRACE("with document resets");
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6, 0,
                  {batch.positions.data(), batch.starts.data()});
  expect_gradients_match_finite_differences(model);
}

// Megatron's resets make a packed document see only itself: the second document of a row,
// after both resets, has the logits, loss and parameter gradients it has alone at the start
// of a row (the first document's targets masked, so it adds no loss).
TEST_P(ModelGradients, ResetsMakeAPackedDocumentMatchItAlone) {
  ModelConfig m = tiny_model(GetParam());
  m.seq_len = 12;
  auto ops = make_cpu_ops(2);
  GptModel packed(m, 1, *ops, DType::F64), alone(m, 1, *ops, DType::F64);
  packed.init_parameters(5);
  alone.init_parameters(5);
  const test::PackedDocuments row;
  packed.set_batch(row.tokens.data(), row.targets.data(), 1, 12, 0, {row.positions.data(), row.starts.data()});
  alone.set_batch(row.second.data(), row.second_targets.data(), 1, 7);
  GptModel* models[] = {&packed, &alone};
  double losses[2];
  for (int k = 0; k < 2; ++k) {
    models[k]->zero_grad();
    losses[k] = models[k]->forward();
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-12);
  std::vector<float> want, got;
  for (int64_t t = 0; t < 7; ++t) {
    packed.logits_row(5 + t, got);
    alone.logits_row(t, want);
    for (size_t v = 0; v < want.size(); ++v) EXPECT_FLOAT_EQ(got[v], want[v]) << "token " << t;
  }
  for (GptModel* model : models) model->backward(1.0 / 7);
  for (size_t i = 0; i < packed.parameters().all().size(); ++i) {
    const Parameter& p = packed.parameters().all()[i];
    const double* g = p.grad.as<double>();
    const double* w = alone.parameters().all()[i].grad.as<double>();
    for (int64_t j = 0; j < p.grad.numel(); ++j)
      ASSERT_NEAR(g[j], w[j], 1e-12) << p.name << "[" << j << "]";
  }

  // Without resets the second document sees the first, and its positions continue after it.
  packed.set_batch(row.tokens.data(), row.targets.data(), 1, 12);
  EXPECT_GT(std::abs(packed.forward() - losses[1]), 1e-3);
}

// Resets that change nothing (positions 0..t-1, every start 0) give the plain step's
// results, bit for bit.
TEST_P(ModelGradients, IdentityResetsChangeNothing) {
  auto ops = make_cpu_ops(2);
  GptModel model(tiny_model(GetParam()), 2, *ops);
  model.init_parameters(7);
  const Batch2x6 batch;
  const std::vector<int32_t> positions = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5};
  const std::vector<int32_t> starts(12, 0);
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  const double plain = model.forward();
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6, 0,
                  {positions.data(), starts.data()});
  EXPECT_EQ(model.forward(), plain);
}

TEST_P(ModelGradients, GradientsReportedReadyNeverChangeAgain) {
  auto ops = make_cpu_ops(2);
  GptModel model(tiny_model(GetParam()), 2, *ops);
  model.init_parameters(7);
  const Batch2x6 batch;
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  const std::vector<int64_t> reported = test::expect_reported_gradients_stay(model);
  ASSERT_EQ(reported.size(), 3u);  // the output layer and final norm, then each block
  EXPECT_GT(reported[0], 0);
  for (size_t i = 1; i < reported.size(); ++i) EXPECT_GT(reported[i], reported[i - 1]);
}

// Recomputation re-runs the same forward ops on the same inputs: the loss and every
// gradient equal those of the run that kept its activations, bit for bit, with document
// resets on (they reach the recomputed attention too); and it keeps less.
TEST_P(ModelGradients, RecomputationChangesNothingButMemory) {
  auto ops = make_cpu_ops(2);
  const Batch2x6 batch;
  const auto step = [&](Recompute recompute, size_t& activation_bytes) {
    ModelSplit split;
    split.recompute = recompute;
    GptModel model(tiny_model(GetParam()), 2, *ops, DType::F32, 0, 1, split);
    model.init_parameters(7);
    model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6, 0,
                    {batch.positions.data(), batch.starts.data()});
    model.zero_grad();
    const double loss = model.forward();
    model.backward(1.0);
    activation_bytes = 0;
    for (const ArenaSize& a : model.memory())
      if (a.name == "activations" || a.name == "recomputed") activation_bytes += a.bytes;
    const Tensor grads = model.parameters().flat_grads();
    std::vector<float> out(grads.as<float>(), grads.as<float>() + grads.numel());
    out.push_back(static_cast<float>(loss));
    return out;
  };
  size_t kept = 0, selective = 0, full = 0;
  const std::vector<float> want = step(Recompute::None, kept);
  EXPECT_EQ(step(Recompute::Selective, selective), want);
  EXPECT_EQ(step(Recompute::Full, full), want);
  EXPECT_LT(selective, kept);
  EXPECT_LT(full, selective);
}

// The backward split in two (tests/model_gradients.h), the first micro-batch packing documents.
TEST_P(ModelGradients, ASplitBackwardAddsWhatTheWholeOneAdds) {
  const Batch2x6 first;
  Batch2x6 second;
  std::reverse(second.tokens.begin(), second.tokens.end());
  test::expect_split_backward_adds_what_the_whole_one_adds(tiny_model(GetParam()), [&](GptModel& model) {
    model.set_batch(first.tokens.data(), first.targets.data(), 2, 6, 0, {first.positions.data(), first.starts.data()});
    model.set_batch(second.tokens.data(), second.targets.data(), 2, 6, 1);
  });
}

TEST_P(ModelGradients, BadResetsAreRefused) {
  auto ops = make_cpu_ops(2);
  GptModel model(tiny_model(GetParam()), 2, *ops, DType::F64);
  const Batch2x6 batch;
  std::vector<int32_t> positions = batch.positions, starts = batch.starts;
  const auto set = [&](DocumentResets resets) {
    return test::error_of([&] { model.set_batch(batch.tokens.data(), nullptr, 2, 6, 0, resets); });
  };
  positions[4] = 6;
  EXPECT_EQ(set({positions.data(), nullptr}),
            "position id 6 at row 0, column 4 is outside [0, model.seq_len=6)");
  positions[4] = -1;
  EXPECT_EQ(set({positions.data(), nullptr}),
            "position id -1 at row 0, column 4 is outside [0, model.seq_len=6)");
  starts[8] = 3;
  EXPECT_EQ(set({nullptr, starts.data()}),
            "attention start 3 at row 1, column 2 is outside [0, its column]");
  starts[8] = -1;
  EXPECT_EQ(set({nullptr, starts.data()}),
            "attention start -1 at row 1, column 2 is outside [0, its column]");
}

TEST_P(ModelGradients, PaddingRowsStayZero) {
  auto ops = make_cpu_ops(2);
  GptModel model(tiny_model(GetParam()), 2, *ops, DType::F64);
  model.init_parameters(7);
  const Batch2x6 batch;
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  model.zero_grad();
  model.forward();
  model.backward(0.1);
  const Parameter& wte = model.parameters().find("wte");
  for (int64_t i = 11 * 16; i < wte.value.numel(); ++i) {
    EXPECT_EQ(wte.value.as<double>()[i], 0.0);
    EXPECT_EQ(wte.grad.as<double>()[i], 0.0);
  }
}

TEST_P(ModelGradients, TinyModelOverfitsOneBatch) {
  auto ops = make_cpu_ops(2);
  ModelConfig m = tiny_model(GetParam());
  m.init_std = 0.02;
  m.d_model = 32;
  GptModel model(m, 2, *ops);
  model.init_parameters(1);
  const Batch2x6 batch;
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  EXPECT_LT(test::train_on_its_batch(model, *ops, 150), 0.1);
}

INSTANTIATE_TEST_SUITE_P(Arch, ModelGradients, testing::Values("gpt2", "llama", "qwen3", "mla", "mla_direct_q"));

}  // namespace
}  // namespace kiln
