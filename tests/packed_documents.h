// Batches that pack documents, for the model's tests (trainer/model/gpt_model_test.cpp,
// multi_token_prediction_test.cpp): two rows of 6, and one row of 12 whose second document
// must compute under Megatron's resets what it computes alone.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::test {

// Two rows of 6 tokens, one target masked; their document resets.
struct Batch2x6 {
  std::vector<int32_t> tokens = {1, 4, 2, 9, 10, 3, 0, 5, 5, 7, 8, 2};
  std::vector<int32_t> targets = {4, 2, 9, 10, 3, 6, 5, 5, -1, 8, 2, 1};  // one masked
  // Row 0 packs documents [0, 3) and [3, 6), row 1 [0, 1) and [1, 6).
  std::vector<int32_t> positions = {0, 1, 2, 0, 1, 2, 0, 0, 1, 2, 3, 4};
  std::vector<int32_t> starts = {0, 0, 0, 3, 3, 3, 0, 1, 1, 1, 1, 1};
};

// One row of 12 tokens packing two documents, the first's targets masked, and the second alone.
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
