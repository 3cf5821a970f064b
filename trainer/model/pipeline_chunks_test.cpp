// A model cut into pipeline chunks computes what the whole model computes: two stages of two
// virtual stages each, run in one process with the activations and gradients copied between
// them as the pipeline sends them, against one whole model, in double precision. The last
// stage of a model with tied embeddings trains a copy of the embedding, whose gradient adds
// to the first stage's.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "tests/error_of.h"
#include "tests/small_model.h"
#include "trainer/memory/host_copy.h"
#include "trainer/model/gpt_model.h"

namespace kiln {
namespace {

ModelConfig four_layer_model(const std::string& arch) {
  ModelConfig m = test::small_model(arch, 16, 11, 6);
  m.n_layer = 4;
  m.make_vocab_size_divisible_by = 8;
  m.init_std = 0.3;
  return m;
}

void copy_into(const Tensor& dst, const Tensor& src) {
  ASSERT_EQ(dst.bytes(), src.bytes());
  std::memcpy(dst.data, src.data, src.bytes());
}

class PipelineChunks : public testing::TestWithParam<std::string> {};

TEST_P(PipelineChunks, ComputeWhatTheWholeModelComputes) {
  const ModelConfig m = four_layer_model(GetParam());
  auto ops = make_cpu_ops(1);
  const std::vector<int32_t> tokens[2] = {{1, 4, 2, 9, 10, 3, 0, 5, 5, 7, 8, 2},
                                          {3, 3, 1, 0, 2, 7, 9, 9, 4, 1, 6, 5}};
  const std::vector<int32_t> targets[2] = {{4, 2, 9, 10, 3, 6, 5, 5, -1, 8, 2, 1},
                                           {3, 1, 0, 2, 7, 9, 9, 4, 1, 6, 5, 2}};
  // Virtual stages in model order: stage 0 layer 0 (+ embedding), stage 1 layer 1,
  // stage 0 layers 2, stage 1 layer 3 (+ head).
  ModelSplit first_split, last_split;
  first_split.chunks = {{0, 1, true, false}, {2, 3, false, false}};
  last_split.chunks = {{1, 2, false, false}, {3, 4, false, true}};
  GptModel whole(m, 2, *ops, DType::F64, 0, 2);
  GptModel first(m, 2, *ops, DType::F64, 0, 2, first_split);
  GptModel last(m, 2, *ops, DType::F64, 0, 2, last_split);
  for (GptModel* model : {&whole, &first, &last}) {
    model->init_parameters(7);
    for (int slot = 0; slot < 2; ++slot)
      model->set_batch(tokens[slot].data(), targets[slot].data(), 2, 6, slot);
  }
  // The virtual stages in order, as (model, chunk).
  const std::vector<std::pair<GptModel*, int>> stages = {{&first, 0}, {&last, 0}, {&first, 1},
                                                         {&last, 1}};
  for (int slot = 0; slot < 2; ++slot) {
    double loss = 0;
    for (size_t v = 0; v < stages.size(); ++v) {
      if (v > 0) copy_into(stages[v].first->chunk_input(slot, stages[v].second),
                           stages[v - 1].first->chunk_output(slot, stages[v - 1].second));
      loss = stages[v].first->forward(slot, stages[v].second);
    }
    EXPECT_NEAR(loss, whole.forward(slot), 1e-12);
  }
  const double dloss = 1.0 / 23;
  for (int slot = 1; slot >= 0; --slot) {
    for (size_t v = stages.size(); v-- > 0;) {
      if (v + 1 < stages.size())
        copy_into(stages[v].first->residual_gradient(slot),
                  stages[v + 1].first->residual_gradient(slot));
      stages[v].first->backward(dloss, slot, {}, stages[v].second);
    }
    whole.backward(dloss, slot);
  }

  // Every parameter is on one stage, but for the tied embedding's copy.
  std::map<std::string, std::vector<double>> staged;
  for (GptModel* model : {&first, &last})
    for (const Parameter& p : model->parameters().all()) {
      std::vector<double> grad = copy_to_doubles(*ops, p.grad);
      auto [at, inserted] = staged.emplace(p.name, grad);
      EXPECT_EQ(inserted, !p.copy) << p.name;
      if (!inserted)
        for (size_t i = 0; i < grad.size(); ++i) at->second[i] += grad[i];
    }
  EXPECT_EQ(staged.size(), whole.parameters().all().size());
  for (const Parameter& p : whole.parameters().all()) {
    ASSERT_TRUE(staged.count(p.name)) << p.name;
    const std::vector<double> expected = copy_to_doubles(*ops, p.grad);
    const std::vector<double>& got = staged[p.name];
    ASSERT_EQ(got.size(), expected.size()) << p.name;
    double norm = 0;
    for (double v : expected) norm += v * v;
    ASSERT_GT(norm, 0) << p.name;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-12) << p.name << "[" << i << "]";
  }
  EXPECT_EQ(first.parameters().whole_count() + last.parameters().whole_count(),
            whole.parameters().whole_count());
  // The last stage's output layer is the embedding's copy when they are tied.
  if (m.tie_embeddings) {
    EXPECT_TRUE(last.parameters().find("wte").copy);
  }
}

TEST_P(PipelineChunks, AStageCannotGiveLogits) {
  auto ops = make_cpu_ops(1);
  ModelSplit split;
  split.chunks = {{0, 2, true, false}};
  GptModel first(four_layer_model(GetParam()), 1, *ops, DType::F64, 0, 1, split);
  std::vector<float> row;
  EXPECT_EQ(test::error_of([&] { first.logits_row(0, row); }),
            "logits_row: this model holds one pipeline stage");
}

INSTANTIATE_TEST_SUITE_P(Archs, PipelineChunks, testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace kiln
