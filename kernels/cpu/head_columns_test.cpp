// The two ops latent attention builds its heads with: copy_head_columns's placements (a block
// per head, one block for every head, the heads summed into one), and RoPE over the trailing
// dims of each head only.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

Tensor rows_of(std::vector<float>& v, int64_t rows, int64_t cols) {
  v.resize(static_cast<size_t>(rows * cols));
  return Tensor{v.data(), DType::F32, {rows, cols}, Device::Cpu};
}

TEST(HeadColumns, MovesEachHeadsBlock) {
  auto ops = make_cpu_ops(1);
  // Two rows of two 3-wide heads; each head's last two columns go to 2-wide blocks.
  std::vector<float> x = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}, out;
  ops->copy_head_columns(rows_of(out, 2, 4), rows_of(x, 2, 6), {2, 2, 0, 2, 1, 3});
  EXPECT_EQ(out, (std::vector<float>{1, 2, 4, 5, 11, 12, 14, 15}));
}

TEST(HeadColumns, OneBlockForEveryHeadAndItsGradient) {
  auto ops = make_cpu_ops(1);
  // A key part every head shares: copied into each 3-wide head at column 1.
  std::vector<float> shared = {7, 8, 70, 80}, heads(12, -1.0f);
  ops->copy_head_columns(rows_of(heads, 2, 6), rows_of(shared, 2, 2), {2, 2, 1, 3, 0, 0});
  EXPECT_EQ(heads, (std::vector<float>{-1, 7, 8, -1, 7, 8, -1, 70, 80, -1, 70, 80}));
  // Its gradient: the heads' blocks summed, in head order.
  std::vector<float> grads = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}, sum = {9, 9, 9, 9};
  ops->copy_head_columns(rows_of(sum, 2, 2), rows_of(grads, 2, 6), {2, 2, 0, 0, 1, 3});
  EXPECT_EQ(sum, (std::vector<float>{1 + 4, 2 + 5, 11 + 14, 12 + 15}));
}

TEST(HeadColumns, BadPlacementsAreRefused) {
  auto ops = make_cpu_ops(1);  // checked
  std::vector<float> x, out(8, 3.0f), tall;
  const Tensor tx = rows_of(x, 2, 6), tout{out.data(), DType::F32, {2, 4}, Device::Cpu};
  // The second head's block would end past x's row.
  EXPECT_EQ(test::error_of([&] { ops->copy_head_columns(tout, tx, {2, 2, 0, 2, 3, 3}); }),
            "copy_head_columns: 2 blocks of 2 from [2, 6] at 3 + h 3 to [2, 4] at 0 + h 2");
  // Blocks that overlap in out; rows that differ.
  EXPECT_NE(test::error_of([&] { ops->copy_head_columns(tout, tx, {2, 2, 0, 1, 0, 3}); }), "");
  EXPECT_NE(test::error_of([&] { ops->copy_head_columns(tout, rows_of(tall, 3, 6), {1, 2, 0, 2, 0, 3}); }), "");
  EXPECT_EQ(out, std::vector<float>(8, 3.0f)) << "the backend ran";
}

// RoPE over the last 4 of each 6-wide head turns those 4 as RoPE over a 4-wide head does,
// leaves the first 2, and its backward turns them back.
TEST(HeadColumns, RopeTurnsOnlyTheTrailingDims) {
  auto ops = make_cpu_ops(1);
  const int64_t T = 3;
  std::vector<float> table(T * 2 * 2);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < 2; ++i) {
      const double angle = static_cast<double>(t) / std::pow(100.0, static_cast<double>(i) / 2);
      table[(t * 2 + i) * 2] = static_cast<float>(std::cos(angle));
      table[(t * 2 + i) * 2 + 1] = static_cast<float>(std::sin(angle));
    }
  const Tensor ttable{table.data(), DType::F32, {T, 2, 2}, Device::Cpu};
  // One query head and one key/value pair: 3 heads of 6 a token.
  std::vector<float> partial(T * 18), whole(T * 12);
  for (size_t i = 0; i < partial.size(); ++i) partial[i] = static_cast<float>(i % 7) - 2.5f + 0.1f * static_cast<float>(i);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t c = 0; c < 4; ++c) whole[(t * 3 + h) * 4 + c] = partial[(t * 3 + h) * 6 + 2 + c];
  const std::vector<float> before = partial;
  const Tensor tpartial{partial.data(), DType::F32, {1, T, 18}, Device::Cpu};
  ops->rope_forward(tpartial, ttable, {1, 1, 6, 4}, Tensor{});
  ops->rope_forward(Tensor{whole.data(), DType::F32, {1, T, 12}, Device::Cpu}, ttable, {1, 1, 4}, Tensor{});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t c = 0; c < 6; ++c) {
        const size_t at = static_cast<size_t>((t * 3 + h) * 6 + c);
        const float want = c < 2 ? before[at] : whole[static_cast<size_t>((t * 3 + h) * 4 + c - 2)];
        EXPECT_EQ(partial[at], want) << "token " << t << " head " << h << " dim " << c;
      }
  ops->rope_backward(tpartial, ttable, {1, 1, 6, 4}, Tensor{});
  for (size_t i = 0; i < partial.size(); ++i) EXPECT_NEAR(partial[i], before[i], 1e-5) << i;
}

}  // namespace
}  // namespace kiln
