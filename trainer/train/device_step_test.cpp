// The step that waits for nothing on the host (device_step.h), queued op by op on the CPU,
// against the step the trainer runs op by op (set_batch, forward, backward, AdamW::step): the
// same losses, gradient norms and weights, bit for bit, over steps of two micro-batches with
// document resets and clipping, for both architectures. On the CPU nothing can be captured:
// the captured run declines, says why, and leaves the model as it was.
#include <gtest/gtest.h>

#include <vector>

#include "base/check.h"
#include "tests/small_model.h"
#include "trainer/memory/host_copy.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/train/device_step.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

constexpr int64_t kStepRows = 2, kStepColumns = 8;
constexpr int kAccum = 2;

struct MicroBatch {
  std::vector<int32_t> tokens, targets, positions, starts;
};

// Micro-batch `micro` of step `step`: random tokens, one target in seven masked, and rows that
// pack a document break at a column that moves with the step.
MicroBatch micro_batch(int step, int micro, int vocab) {
  Random rng(static_cast<uint64_t>(100 * step + micro));
  MicroBatch b;
  for (int64_t i = 0; i < kStepRows * kStepColumns; ++i) {
    const int64_t column = i % kStepColumns, start = column < 2 + step % 4 ? 0 : 2 + step % 4;
    b.tokens.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab))));
    b.targets.push_back(i % 7 == 3 ? -1 : static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab))));
    b.positions.push_back(static_cast<int32_t>(column - start));
    b.starts.push_back(static_cast<int32_t>(start));
  }
  return b;
}

struct DeviceTrained {
  std::vector<double> losses, norms, weights;
};

TrainConfig train_config() {
  TrainConfig t;
  t.clip_grad = 0.5;  // small enough that the steps clip
  t.weight_decay = 0.1;
  return t;
}

// Three steps of the model, op by op as the trainer runs them, or through a DeviceStep.
DeviceTrained train_model(const std::string& arch, bool device_step) {
  auto ops = make_cpu_ops(1);
  const ModelConfig m = test::small_model(arch, 16, 23, kStepColumns);
  GptModel model(m, kStepRows, *ops);
  model.init_parameters(3);
  const TrainConfig t = train_config();
  AdamW optimizer(t, model.parameters(), *ops);
  DocumentOptions documents;
  documents.reset_position_ids = documents.reset_attention_mask = true;
  DeviceStep step(model, optimizer, *ops, kAccum, documents);
  const double tokens = kAccum * kStepRows * kStepColumns, dloss = 1.0 / tokens;
  DeviceTrained out;
  for (int s = 1; s <= 3; ++s) {
    const double lr = 1e-2 * s;
    std::vector<MicroBatch> micro;
    for (int i = 0; i < kAccum; ++i) micro.push_back(micro_batch(s, i, m.vocab_size));
    if (device_step) {
      for (int i = 0; i < kAccum; ++i)
        step.stage(i, micro[i].tokens.data(), micro[i].targets.data(), {micro[i].positions.data(), micro[i].starts.data()});
      const auto result = step.run(lr, 1.0, dloss, /*captured=*/false);
      out.losses.push_back(result->nats);
      out.norms.push_back(result->update.grad_norm);
    } else {
      double nats = 0;
      model.zero_grad();
      for (int i = 0; i < kAccum; ++i) {
        model.set_batch(micro[i].tokens.data(), micro[i].targets.data(), kStepRows, kStepColumns, 0,
                        {micro[i].positions.data(), micro[i].starts.data()});
        model.forward();
        nats += GptModel::loss_sum(copy_to_doubles(*ops, model.token_losses()));
        model.backward(dloss);
      }
      out.losses.push_back(nats);
      out.norms.push_back(optimizer.step(lr).grad_norm);
    }
  }
  out.weights = copy_to_doubles(*ops, model.parameters().flat_values());
  return out;
}

class DeviceStepOnTheCpu : public testing::TestWithParam<std::string> {};

TEST_P(DeviceStepOnTheCpu, TrainsTheSameBitsAsTheStepOpByOp) {
  const DeviceTrained by_ops = train_model(GetParam(), false), queued = train_model(GetParam(), true);
  EXPECT_EQ(queued.losses, by_ops.losses);
  EXPECT_EQ(queued.norms, by_ops.norms);
  EXPECT_EQ(queued.weights, by_ops.weights);
  // The clip took part: a norm above train.clip_grad.
  EXPECT_GT(by_ops.norms.front(), train_config().clip_grad);
}

INSTANTIATE_TEST_SUITE_P(Arch, DeviceStepOnTheCpu, testing::Values("gpt2", "llama"));

TEST(DeviceStep, TheCpuCapturesNothingAndSaysWhy) {
  auto ops = make_cpu_ops(1);
  const ModelConfig m = test::small_model("gpt2", 16, 23, kStepColumns);
  GptModel model(m, kStepRows, *ops);
  model.init_parameters(3);
  AdamW optimizer(train_config(), model.parameters(), *ops);
  DeviceStep step(model, optimizer, *ops, 1, DocumentOptions{});
  const MicroBatch b = micro_batch(1, 0, m.vocab_size);
  step.stage(0, b.tokens.data(), b.targets.data(), {});
  const std::vector<double> before = copy_to_doubles(*ops, model.parameters().flat_values());
  EXPECT_FALSE(step.run(1e-2, 1.0, 1.0 / (kStepRows * kStepColumns), /*captured=*/true));
  EXPECT_EQ(step.why_not(), "the CPU backend runs each op as it is called");
  EXPECT_EQ(copy_to_doubles(*ops, model.parameters().flat_values()), before);
  EXPECT_EQ(optimizer.steps_taken(), 0);
}

TEST(DeviceStep, StagingRefusesABatchTheModelWouldRefuse) {
  auto ops = make_cpu_ops(1);
  const ModelConfig m = test::small_model("gpt2", 16, 23, kStepColumns);
  GptModel model(m, kStepRows, *ops);
  AdamW optimizer(train_config(), model.parameters(), *ops);
  DeviceStep step(model, optimizer, *ops, 1, DocumentOptions{});
  MicroBatch b = micro_batch(1, 0, m.vocab_size);
  b.tokens[5] = 23;
  try {
    step.stage(0, b.tokens.data(), b.targets.data(), {});
    FAIL() << "an out-of-range token was staged";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "token id 23 is outside model.vocab_size=23");
  }
}

}  // namespace
}  // namespace kiln
