// The whole model's gradients against central finite differences, in double precision,
// for both architectures; and a tiny fp32 model that must overfit one batch.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

ModelConfig tiny_model(const std::string& arch) {
  ModelConfig m;
  m.arch = arch;
  m.n_layer = 2;
  m.n_head = 4;
  m.n_kv_head = arch == "llama" ? 2 : 0;
  m.d_model = 16;
  m.d_ff = arch == "llama" ? 24 : 0;
  m.vocab_size = 11;
  m.seq_len = 6;
  m.tie_embeddings = arch != "llama";
  m.make_vocab_size_divisible_by = 8;  // 11 -> 16: padding columns take part in nothing
  m.init_std = 0.3;                    // large enough that every path carries gradient
  return m;
}

struct Batch2x6 {
  std::vector<int32_t> tokens = {1, 4, 2, 9, 10, 3, 0, 5, 5, 7, 8, 2};
  std::vector<int32_t> targets = {4, 2, 9, 10, 3, 6, 5, 5, -1, 8, 2, 1};  // one masked
};

class ModelGradients : public testing::TestWithParam<std::string> {};

TEST_P(ModelGradients, MatchFiniteDifferences) {
  auto ops = make_cpu_ops(2);
  GptModel model(tiny_model(GetParam()), 2, *ops, DType::F64);
  model.init_parameters(7);
  const Batch2x6 batch;
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  model.zero_grad();
  model.forward();
  model.backward(1.0 / static_cast<double>(model.target_count()));

  Random pick(3);
  int checked = 0;
  double worst = 0;
  for (const Parameter& p : model.parameters().all()) {
    double* value = p.value.as<double>();
    const double* grad = p.grad.as<double>();
    const int64_t real = p.value.numel() / p.value.shape[0] * p.real_rows;
    for (int k = 0; k < 6; ++k) {
      const int64_t i = static_cast<int64_t>(pick.below(static_cast<uint64_t>(real)));
      const double saved = value[i], h = 1e-5;
      value[i] = saved + h;
      const double up = model.forward();
      value[i] = saved - h;
      const double down = model.forward();
      value[i] = saved;
      const double numeric = (up - down) / (2 * h);
      const double error = std::abs(numeric - grad[i]) / std::max(1e-3, std::abs(numeric));
      worst = std::max(worst, error);
      EXPECT_LT(error, 1e-5) << p.name << "[" << i << "] numeric " << numeric << " analytic "
                             << grad[i];
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
  EXPECT_LT(worst, 1e-5);
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
  TrainConfig train;
  train.weight_decay = 0;
  AdamW optimizer(train, model.parameters(), *ops);
  const Batch2x6 batch;
  model.set_batch(batch.tokens.data(), batch.targets.data(), 2, 6);
  double loss = 0;
  for (int step = 0; step < 150; ++step) {
    model.zero_grad();
    loss = model.forward();
    model.backward(1.0 / static_cast<double>(model.target_count()));
    optimizer.step(1e-2);
  }
  EXPECT_LT(loss, 0.1);
}

INSTANTIATE_TEST_SUITE_P(Arch, ModelGradients, testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace kiln
