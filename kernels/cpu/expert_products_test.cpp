// The CPU's experts' products (ops.h: expert_matmul, expert_weight_grad) on a small case worked
// by hand: three experts of two weight rows each, the middle one without rows; and the checks
// that refuse offsets and weights that do not fit.
#include <gtest/gtest.h>

#include <vector>

#include "base/check.h"
#include "kernels/ops.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

Tensor matrix(std::vector<float>& v, int64_t rows) {
  return {v.data(), DType::F32, {rows, static_cast<int64_t>(v.size()) / rows}};
}

// Expert 0 owns rows 0-1, expert 1 none, expert 2 rows 2-4 (offsets 0, 2, 2, 5). The stacked
// weight w [3 * 2, 2]: expert e's rows 2e and 2e + 1.
const std::vector<int64_t> kOffsets = {0, 2, 2, 5};

TEST(CpuExpertProducts, EachExpertsRowsTakeItsOwnWeights) {
  const auto ops = make_cpu_ops(2);
  std::vector<float> w = {1, 0, 0, 1,    // expert 0: the identity
                          9, 9, 9, 9,    // expert 1: no rows, never read
                          1, 1, 2, -1};  // expert 2
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<float> out(10, 7.0f);
  // out_e = x_e w_e^T: expert 2's row (a, b) becomes (a + b, 2a - b).
  ops->expert_matmul(matrix(out, 5), matrix(x, 5), matrix(w, 6), true, kOffsets);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 11, 4, 15, 6, 19, 8}));
  // out_e = x_e w_e: expert 2's row (a, b) becomes (a + 2b, a - b).
  ops->expert_matmul(matrix(out, 5), matrix(x, 5), matrix(w, 6), false, kOffsets);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 17, -1, 23, -1, 29, -1}));
}

TEST(CpuExpertProducts, TheWeightGradientAddsEachExpertsRowsAlone) {
  const auto ops = make_cpu_ops(2);
  std::vector<float> dy = {1, 0, 0, 1, 1, 1, 0, 2, 1, 0};
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<float> dw(12, 1.0f);
  ops->expert_weight_grad(matrix(dw, 6), matrix(dy, 5), matrix(x, 5), kOffsets);
  // Expert 0: dy_0^T x_0 = [[1, 2], [3, 4]]; expert 1 keeps what it held; expert 2:
  // [[1*5 + 0*7 + 1*9, 1*6 + 0*8 + 1*10], [1*5 + 2*7 + 0*9, 1*6 + 2*8 + 0*10]].
  EXPECT_EQ(dw, (std::vector<float>{2, 3, 4, 5, 1, 1, 1, 1, 15, 17, 20, 23}));
}

TEST(CpuExpertProducts, OffsetsAndWeightsThatDoNotFitAreRefused) {
  const auto ops = make_cpu_ops(1);
  std::vector<float> w(12), x(10), out(10), odd(10);
  EXPECT_EQ(test::error_of([&] { ops->expert_matmul(matrix(out, 5), matrix(x, 5), matrix(w, 6), true, {0, 2, 4}); }),
            "expert_matmul: the experts' row offsets must ascend from 0 to the 5 rows of [5, 2]");
  EXPECT_EQ(test::error_of([&] { ops->expert_matmul(matrix(out, 5), matrix(x, 5), matrix(w, 6), true, {0, 3, 2, 5}); }),
            "expert_matmul: the experts' row offsets must ascend from 0 to the 5 rows of [5, 2]");
  EXPECT_EQ(test::error_of([&] { ops->expert_matmul(matrix(out, 5), matrix(x, 5), matrix(odd, 5), true, {0, 2, 2, 5}); }),
            "expert_matmul: a weight of 5 rows does not stack 3 experts evenly");
  EXPECT_EQ(test::error_of([&] { ops->expert_weight_grad(matrix(w, 6), matrix(x, 5), matrix(out, 2), {0, 2, 2, 5}); }),
            "expert_weight_grad: the experts' row offsets must ascend from 0 to the 2 rows of [2, 5]");
}

}  // namespace
}  // namespace kiln
