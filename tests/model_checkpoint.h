// A checkpoint of a small model for interchange tests: one rank, step 3, the model initialised
// from seed 9 (padding rows zero, as training keeps them), then changed by `adjust` when given,
// with the MoE layers' selection bias given.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/optim/adamw.h"

namespace kiln::test {

inline std::string save_test_model(const ModelConfig& m, const std::filesystem::path& root,
                                   const std::function<void(GptModel&)>& adjust = {},
                                   const std::map<int, std::vector<double>>& expert_bias = {}) {
  auto ops = make_cpu_ops(2);
  GptModel model(m, 1, *ops);
  model.init_parameters(9);
  if (adjust) adjust(model);
  TrainConfig train;
  AdamW optimizer(train, model.parameters(), *ops);
  Config config;
  config.model = m;
  TrainingState state;
  state.step = 3;
  state.run_name = "original";
  state.layout = "tp1.pp1.dp1";
  state.config = config_to_json(config);
  state.expert_bias = expert_bias;
  return save_checkpoint(root.string(), state, model, optimizer.state_for_checkpoint(), *ops, 0).path;
}

}  // namespace kiln::test
