// The optimizer over an expert-parallel rank's layout, on any backend: the parameters come
// in backward's order, each layer's experts in the region after the dense one, so the order
// of the parameters is not the order of the flat buffers, and every parameter must still
// take its step. On the GPU they once did not: the CUDA kernel walked the segment table in
// the parameters' order, skipped most of them and stopped at the embedding, so expert
// parallelism left the one-GPU curve after the first update (tests/layouts_cuda_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainer/memory/host_copy.h"
#include "trainer/optim/adamw.h"

namespace kiln::test {

// Two layers, last first, each a norm, an expert stack and a router, then the embedding.
inline void lay_out_expert_rank(ParameterSet& set) {
  set.begin_pass();
  for (int layer = 1; layer >= 0; --layer) {
    const std::string name = "layers." + std::to_string(layer);
    set.add(name + ".norm.weight", {5}, Init::Ones);
    set.add_expert(name + ".experts.fc.weight", {4, 3}, Init::Normal, 0.02, {});
    set.add(name + ".router.weight", {2, 3}, Init::Normal, 0.02);
  }
  set.add("wte", {7, 3}, Init::Normal, 0.02);
}

// One AdamW step from zero moments moves each element by lr against its gradient's sign.
inline void expect_every_parameter_steps(Ops& ops) {
  ParameterSet set(DType::F32, DType::F32);
  lay_out_expert_rank(set);
  set.allocate(ops);
  lay_out_expert_rank(set);
  ASSERT_LT(set.dense_size(), set.size()) << "no experts' region";
  std::vector<std::vector<double>> before;
  double g = 0.25;
  for (const Parameter& p : set.all()) {
    std::vector<double> values(static_cast<size_t>(p.value.numel())), grads(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = 0.1 * static_cast<double>(i + 1);
      grads[i] = i % 2 ? g : -g;
    }
    g *= 1.5;
    copy_from_doubles(ops, p.value, values);
    copy_from_doubles(ops, p.grad, grads);
    before.push_back(values);
  }
  TrainConfig train;
  train.weight_decay = 0;
  AdamW optimizer(train, set, ops);
  const double lr = 1e-2;
  optimizer.step(lr);
  for (size_t k = 0; k < set.all().size(); ++k) {
    const Parameter& p = set.all()[k];
    const std::vector<double> after = copy_to_doubles(ops, p.value);
    for (size_t i = 0; i < after.size(); ++i)
      ASSERT_NEAR(after[i], before[k][i] + (i % 2 ? -lr : lr), 1e-6) << p.name << "[" << i << "]";
  }
}

}  // namespace kiln::test
