// One row of 12 tokens packing two documents, the first's targets masked, and the second
// alone: Megatron's resets must make the packed second document compute what it computes alone
// (trainer/model/gpt_model_test.cpp, multi_token_prediction_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::test {

struct PackedDocuments {
  std::vector<int32_t> second = {2, 7, 4, 10, 0, 9, 5};
  std::vector<int32_t> second_targets = {7, 4, 10, 0, 9, 5, 1};
  // The row: a document of 5 tokens (targets masked), then the second; its position ids and
  // attention starts restart at the second.
  std::vector<int32_t> tokens = {3, 8, 8, 1, 6}, targets = std::vector<int32_t>(5, -1), positions, starts;

  PackedDocuments() {
    tokens.insert(tokens.end(), second.begin(), second.end());
    targets.insert(targets.end(), second_targets.begin(), second_targets.end());
    for (int32_t t = 0; t < 12; ++t) {
      positions.push_back(t < 5 ? t : t - 5);
      starts.push_back(t < 5 ? 0 : 5);
    }
  }
};

}  // namespace kiln::test
