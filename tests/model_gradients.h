// Checks a model's gradients against central finite differences of its loss in double
// precision, and trains a model on one batch: what the model tests of every layer share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/util/random.h"

namespace kiln::test {

// The gradients the model holds (of `objective` at the current parameters) against central
// finite differences of objective(), at 6 random elements of every parameter; returns the
// worst relative error.
inline double expect_gradients_match_finite_differences(GptModel& model,
                                                        const std::function<double()>& objective) {
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
      const double up = objective();
      value[i] = saved - h;
      const double down = objective();
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
  return worst;
}

// What data-parallel buckets rely on: once backward says the first n elements of the flat
// gradient buffer are final, the rest of backward leaves them alone. Runs forward and backward
// over the batch the model holds and returns backward's reports, each checked so, and below the
// whole buffer (the embeddings, last, are never reported early).
inline std::vector<int64_t> expect_reported_gradients_stay(GptModel& model) {
  model.zero_grad();
  model.forward();
  const Tensor grads = model.parameters().flat_grads();
  std::vector<int64_t> reported;
  std::vector<std::vector<float>> snapshots;
  model.backward(1.0, 0, [&](int64_t ready) {
    reported.push_back(ready);
    snapshots.emplace_back(grads.as<float>(), grads.as<float>() + ready);
  });
  for (size_t i = 0; i < reported.size(); ++i) {
    EXPECT_LT(reported[i], grads.numel());
    EXPECT_EQ(std::vector<float>(grads.as<float>(), grads.as<float>() + reported[i]), snapshots[i]) << "report " << i;
  }
  return reported;
}

// Trains the batch the model holds for `steps` AdamW steps at lr 1e-2 without weight decay;
// returns the last loss.
inline double train_on_its_batch(GptModel& model, Ops& ops, int steps) {
  TrainConfig train;
  train.weight_decay = 0;
  AdamW optimizer(train, model.parameters(), ops);
  double loss = 0;
  for (int step = 0; step < steps; ++step) {
    model.zero_grad();
    loss = model.forward();
    model.backward(1.0 / static_cast<double>(model.target_count()));
    optimizer.step(1e-2);
  }
  return loss;
}

// The backward split in two, as the zero-bubble schedules run it: a model of `config` with
// two slots, which `load` fills, runs both micro-batches' forwards and input gradients, then
// their weight passes. Their losses and every gradient must equal two whole backwards' bit for
// bit (each gradient adds up in the same order), with full recomputation too (the weight pass
// reads the copies it kept, not the recomputed arena); the copies are an arena of their own.
// The input-gradient passes leave every gradient to the weight passes: each is still zero
// between them.
inline void expect_split_backward_adds_what_the_whole_one_adds(const ModelConfig& config,
                                                                const std::function<void(GptModel&)>& load) {
  auto ops = make_cpu_ops(2);
  const auto step = [&](bool split_backward, Recompute recompute, size_t& kept_bytes) {
    ModelSplit split;
    split.split_backward = split_backward;
    split.recompute = recompute;
    GptModel model(config, 2, *ops, DType::F32, 0, 2, split);
    model.init_parameters(7);
    model.zero_grad();
    load(model);
    std::vector<float> out;
    for (int slot : {0, 1}) {
      out.push_back(static_cast<float>(model.forward(slot)));
      const double dloss = 1.0 / static_cast<double>(model.target_count(slot));
      if (split_backward) model.backward_input(dloss, slot);
      else model.backward(dloss, slot);
    }
    if (split_backward) {
      const Tensor grads = model.parameters().flat_grads();
      const std::vector<float> untouched(static_cast<size_t>(grads.numel()), 0.0f);
      EXPECT_EQ(std::vector<float>(grads.as<float>(), grads.as<float>() + grads.numel()), untouched)
          << "a weight gradient came with the input gradients";
      for (int slot : {0, 1}) model.backward_weights(slot);
    }
    kept_bytes = 0;
    for (const ArenaSize& a : model.memory())
      if (a.name == "weight gradient inputs") kept_bytes = a.bytes;
    const Tensor grads = model.parameters().flat_grads();
    out.insert(out.end(), grads.as<float>(), grads.as<float>() + grads.numel());
    return out;
  };
  size_t none = 0, kept = 0, kept_recomputing = 0;
  const std::vector<float> want = step(false, Recompute::None, none);
  EXPECT_EQ(none, 0u);
  EXPECT_EQ(step(true, Recompute::None, kept), want);
  EXPECT_EQ(step(true, Recompute::Full, kept_recomputing), want);
  EXPECT_GT(kept, 0u);
  EXPECT_EQ(kept_recomputing, kept);
}

}  // namespace kiln::test
