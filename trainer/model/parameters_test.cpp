// How a parameter's piece is cut from the whole and the whole put back from every rank's
// piece: a tensor-parallel split of several parts, and the experts' two-level split (blocks of
// experts over an expert group, then each block's parts over a tensor group), by hand. And
// where sharded data parallelism's units lie whole: the windows each kind of unit takes.
#include "trainer/model/parameters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

namespace kiln {
namespace {

// A parameter of local shape `piece` under `split`, with no buffers (only shapes are read).
Parameter piece_with(Shape piece, const TensorSplit& split) {
  Parameter p;
  p.value = {nullptr, DType::F32, piece, Device::Cpu};
  p.split = split;
  p.real_rows = p.whole_shape()[0];
  return p;
}

std::vector<double> counting(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

TEST(ParameterSplit, ExpertBlocksThenTensorPartsByRows) {
  // 4 experts of a SwiGLU width 2 ([gate | up] = 4 rows each, one column), over ep 2 and tp 2:
  // block b holds experts 2b and 2b + 1 (whole rows [8b, 8b + 8)), and tensor rank r the r-th
  // row of each of the block's four 2-row parts.
  std::vector<Parameter> pieces;
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < 2; ++r) pieces.push_back(piece_with({4, 1}, {0, {2, 2, 2, 2}, r, 2, 2, b}));
  EXPECT_EQ(pieces[0].whole_shape(), (Shape{16, 1}));
  const std::vector<double> whole = counting(16);
  EXPECT_EQ(pieces[3].piece_of(whole), (std::vector<double>{9, 11, 13, 15}));
  EXPECT_EQ(pieces[1].piece_of(whole), (std::vector<double>{1, 3, 5, 7}));
  std::vector<double> all;
  for (const Parameter& p : pieces) {
    const std::vector<double> mine = p.piece_of(whole);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  EXPECT_EQ(pieces[0].whole_from(all), whole);
  EXPECT_EQ(pieces[2].local_real_rows(), 4);
}

TEST(ParameterSplit, ExpertBlocksThenTensorColumns) {
  // Projections [E * C, F] with E 2, C 1, F 4 over ep 2 and tp 2: block b is row b, and
  // tensor rank r its columns [2r, 2r + 2).
  const Parameter p = piece_with({1, 2}, {1, {4}, 1, 2, 2, 1});
  EXPECT_EQ(p.whole_shape(), (Shape{2, 4}));
  EXPECT_EQ(p.piece_of(counting(8)), (std::vector<double>{6, 7}));
}

TEST(ParameterSplit, ExpertBlocksAloneAreWholeOnEveryTensorRank) {
  // A bias every tensor rank holds whole: only the blocks cut it.
  const Parameter p = piece_with({3}, {-1, {}, 0, 1, 2, 1});
  EXPECT_TRUE(p.split.sharded());
  EXPECT_FALSE(p.split.tensor_sharded());
  EXPECT_EQ(p.whole_shape(), (Shape{6}));
  EXPECT_EQ(p.piece_of(counting(6)), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(p.whole_from({0, 1, 2, 3, 4, 5}), counting(6));
}

// A model's units in the order it lays them out (head, the blocks last to first, embeddings),
// the dense parts sharded over 2 ranks and the blocks' experts over 4, with their values, the
// head and the embeddings held as `ends`. Sizes only: no memory is allocated.
std::vector<ParameterUnit> units_of(ParameterSet& set, UnitHold ends) {
  set.shard_units(2, 0, true, 4, 1);
  set.begin_pass();
  set.begin_unit(ends);
  set.add("lm_head.weight", {40, 8}, Init::Zeros);
  for (int64_t rows : {10, 12, 10}) {
    set.begin_unit(UnitHold::Turn);
    set.add("block" + std::to_string(rows), {rows, 8}, Init::Zeros);
    set.add_expert("experts" + std::to_string(rows), {3 * rows, 8}, Init::Zeros, 0, {});
  }
  set.begin_unit(ends);
  set.add("wte", {64, 8}, Init::Zeros);
  set.size_regions(2, 4);
  return set.units();
}

TEST(ParameterUnits, TheEndsShareOneWindowAndTheBlocksTakeTwoInTurn) {
  ParameterSet set(DType::F32, DType::F32);
  const std::vector<ParameterUnit> u = units_of(set, UnitHold::Ends);
  ASSERT_EQ(u.size(), 5u);
  const auto length = [&](size_t i) { return u[i].dense.size(); };
  // The head and the embeddings take turns in one window, as long as the longer of them.
  EXPECT_EQ(u[0].dense.window, 0);
  EXPECT_EQ(u[4].dense.window, 0);
  const int64_t ends = std::max(length(0), length(4));
  EXPECT_GE(length(4), 64 * 8);
  // The blocks alternate between two windows after it, each as long as the longest block.
  const int64_t block = std::max({length(1), length(2), length(3)});
  EXPECT_EQ(u[1].dense.window, ends);
  EXPECT_EQ(u[2].dense.window, ends + block);
  EXPECT_EQ(u[3].dense.window, ends);
  // Each rank's shards follow one another, unit by unit.
  for (size_t i = 1; i < u.size(); ++i) EXPECT_EQ(u[i].dense.shard_at, u[i - 1].dense.shard_at + length(i - 1) / 2);
  // The blocks' experts lie in the experts' region, each a multiple of its 4 shards long, and
  // take two windows of their own in the same turns; the ends have none.
  EXPECT_FALSE(u[0].has(UnitPart::Experts));
  EXPECT_FALSE(u[4].has(UnitPart::Experts));
  EXPECT_EQ(u[1].experts.first, set.dense_size());
  int64_t expert_block = 0;
  const int64_t rows[] = {0, 10, 12, 10};
  for (size_t i = 1; i <= 3; ++i) {
    EXPECT_GE(u[i].experts.size(), 3 * rows[i] * 8) << i;
    EXPECT_EQ(u[i].experts.size() % (4 * 32), 0) << i;
    expert_block = std::max(expert_block, u[i].experts.size());
  }
  EXPECT_EQ(u[2].experts.first, u[1].experts.last);
  EXPECT_EQ(u[3].experts.last, set.size());
  EXPECT_EQ(u[1].experts.window, 0);
  EXPECT_EQ(u[2].experts.window, expert_block);
  EXPECT_EQ(u[3].experts.window, 0);
  EXPECT_EQ(u[2].experts.shard_at, u[1].experts.size() / 4);
  EXPECT_EQ(set.window_bytes(), static_cast<size_t>(ends + 2 * block + 2 * expert_block) * 2 * sizeof(float));
  // The rank keeps 1/2 of the dense values and 1/4 of the experts'.
  EXPECT_EQ(set.value_bytes(), static_cast<size_t>(set.dense_size() / 2 + (set.size() - set.dense_size()) / 4) *
                                   sizeof(float));
  EXPECT_EQ(set.grad_bytes(), 0u);
}

TEST(ParameterUnits, WholeStepUnitsEachHaveAWindowOfTheirOwn) {
  ParameterSet set(DType::F32, DType::F32);
  const std::vector<ParameterUnit> u = units_of(set, UnitHold::Step);
  const auto length = [&](size_t i) { return u[i].dense.size(); };
  EXPECT_EQ(u[0].dense.window, 0);
  EXPECT_EQ(u[4].dense.window, length(0));
  const int64_t ends = length(0) + length(4);
  const int64_t block = std::max({length(1), length(2), length(3)});
  EXPECT_EQ(u[1].dense.window, ends);
  EXPECT_EQ(u[2].dense.window, ends + block);
}

}  // namespace
}  // namespace kiln
