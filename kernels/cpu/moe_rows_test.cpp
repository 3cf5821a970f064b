// The CPU's expert row moves (ops.h: gather_rows, combine_rows, row_dots) on a small case
// worked by hand, including indices that name no row.
#include <gtest/gtest.h>

#include <vector>

#include "base/check.h"
#include "kernels/ops.h"

namespace kiln {
namespace {

Tensor matrix(std::vector<float>& v, int64_t rows) {
  return {v.data(), DType::F32, {rows, static_cast<int64_t>(v.size()) / rows}};
}
Tensor indices(std::vector<int32_t>& v) {
  return {v.data(), DType::I32, {static_cast<int64_t>(v.size())}};
}

TEST(CpuExpertRows, GatherCombineAndDotsByHand) {
  const auto ops = make_cpu_ops(2);
  std::vector<float> x = {1, 2, 3, 4, 5, 6};  // 3 tokens of 2 channels
  std::vector<int32_t> src = {2, 0, -1, 0};   // row 2 is padding
  std::vector<float> row_w = {0.5f, 2, 9, -1};
  std::vector<float> gathered(8, 7.0f);
  ops->gather_rows(matrix(gathered, 4), matrix(x, 3), indices(src), matrix(row_w, 4));
  EXPECT_EQ(gathered, (std::vector<float>{2.5f, 3, 2, 4, 0, 0, -1, -2}));

  // Token 0 takes rows 1 and 3, token 1 row 0 and a dropped choice, token 2 nothing.
  std::vector<int32_t> pos = {1, 3, 0, -1, -1, -1};
  std::vector<float> pair_w = {0.25f, 0.75f, 2, 5, 5, 5};
  std::vector<float> y = {1, 1, 2, 4, 0, 0, 8, -4};  // 4 expert rows
  std::vector<float> combined(6, 7.0f);
  ops->combine_rows(matrix(combined, 3), matrix(y, 4), indices(pos), matrix(pair_w, 3), false);
  EXPECT_EQ(combined, (std::vector<float>{6.5f, -2, 2, 2, 0, 0}));
  ops->combine_rows(matrix(combined, 3), matrix(y, 4), indices(pos), Tensor{}, true);
  EXPECT_EQ(combined, (std::vector<float>{16.5f, -2, 3, 3, 0, 0}));

  std::vector<float> dots(6, 7.0f);
  ops->row_dots(matrix(dots, 3), matrix(x, 3), matrix(y, 4), indices(pos));
  EXPECT_EQ(dots, (std::vector<float>{10, 0, 7, 0, 0, 0}));
}

TEST(CpuExpertRows, MismatchedIndicesAreRefused) {
  const auto ops = make_cpu_ops(1);
  std::vector<float> x(6), out(4);
  std::vector<int32_t> src = {0, 1, 2};
  EXPECT_THROW(ops->gather_rows(matrix(out, 2), matrix(x, 3), indices(src), Tensor{}), Error);
}

}  // namespace
}  // namespace kiln
