#include "trainer/config/sweep_grid.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tests/error_of.h"

namespace kiln {
namespace {

using test::error_of;

std::vector<SweepAxis> axes_of(const std::vector<std::string>& texts) {
  std::vector<SweepAxis> axes;
  for (const std::string& text : texts) axes.push_back(parse_sweep_axis(text));
  return axes;
}

std::vector<std::string> joined(const std::vector<SweepPoint>& points) {
  std::vector<std::string> out;
  for (const SweepPoint& point : points) {
    std::string line;
    for (const std::string& o : point_overrides(point)) {
      if (!line.empty()) line += ' ';
      line += o;
    }
    out.push_back(line);
  }
  return out;
}

TEST(SweepGrid, ParsesListsAndRanges) {
  const SweepAxis list = parse_sweep_axis("train.lr=1e-3,3e-3");
  EXPECT_EQ(list.key, "train.lr");
  EXPECT_EQ(list.values, (std::vector<std::string>{"1e-3", "3e-3"}));
  EXPECT_FALSE(list.range);

  // A JSON array is one value: the commas inside it do not split.
  const SweepAxis arrays = parse_sweep_axis(R"(data.paths=["a","b,c"],["d"])");
  EXPECT_EQ(arrays.values, (std::vector<std::string>{R"(["a","b,c"])", R"(["d"])"}));

  const SweepAxis log = parse_sweep_axis("train.lr=log:1e-4..1e-2");
  ASSERT_TRUE(log.range);
  EXPECT_EQ(log.range->lo, 1e-4);
  EXPECT_EQ(log.range->hi, 1e-2);
  EXPECT_TRUE(log.range->log);
  EXPECT_FALSE(log.range->integer);

  // A key within an object of its section.
  EXPECT_EQ(parse_sweep_axis("finetune.lora.rank=8,16").key, "finetune.lora.rank");

  const SweepAxis ints = parse_sweep_axis("train.warmup=10..100");
  ASSERT_TRUE(ints.range);
  EXPECT_TRUE(ints.range->integer);
  EXPECT_FALSE(ints.range->log);
}

TEST(SweepGrid, RefusesMalformedAxesInOneLine) {
  EXPECT_EQ(error_of([] { parse_sweep_axis("train.lr"); }),
            "sweep: --grid train.lr has no '='; write section.key=v1,v2 or section.key=lo..hi");
  EXPECT_EQ(error_of([] { parse_sweep_axis("lr=1,2"); }),
            "sweep: --grid lr=1,2 must name section.key before '=', e.g. train.lr=1e-3,3e-3");
  EXPECT_EQ(error_of([] { parse_sweep_axis("train.lr=1e-3,,3e-3"); }),
            "sweep: --grid train.lr=1e-3,,3e-3 has an empty value");
  EXPECT_EQ(error_of([] { parse_sweep_axis("train.lr="); }), "sweep: --grid train.lr= has an empty value");
  EXPECT_EQ(error_of([] { parse_sweep_axis("train.lr=1,2,1"); }), "sweep: --grid train.lr=1,2,1 lists 1 twice");
  EXPECT_EQ(error_of([] { parse_sweep_axis("train.lr=log:0..1"); }),
            "sweep: --grid train.lr=log:0..1: a log range needs bounds above 0");
  EXPECT_EQ(error_of([] { parse_sweep_axis("train.lr=3..1"); }),
            "sweep: --grid train.lr=3..1: the range's low bound must be below its high bound");
  EXPECT_EQ(error_of([] { parse_sweep_axis("train.lr=log:a..1"); }),
            "sweep: --grid train.lr=log:a..1: the range's bounds must be numbers");
}

TEST(SweepGrid, GridIsTheProductFirstAxisSlowest) {
  EXPECT_EQ(joined(grid_points(axes_of({"train.lr=1e-3,3e-3", "model.d_model=128,256,512"}))),
            (std::vector<std::string>{"train.lr=1e-3 model.d_model=128", "train.lr=1e-3 model.d_model=256",
                                      "train.lr=1e-3 model.d_model=512", "train.lr=3e-3 model.d_model=128",
                                      "train.lr=3e-3 model.d_model=256", "train.lr=3e-3 model.d_model=512"}));
  const SweepPoint point = grid_points(axes_of({"train.lr=1e-3", "train.decay=cosine"}))[0];
  EXPECT_EQ(point_params(point).dump(), R"({"train.lr":0.001,"train.decay":"cosine"})");
}

TEST(SweepGrid, GridRefusesRangesRepeatsAndTooManyPoints) {
  EXPECT_EQ(error_of([] { grid_points(axes_of({"train.lr=1..2"})); }),
            "sweep: --grid train.lr is a range, which only --random N draws from; list its values instead");
  EXPECT_EQ(error_of([] { grid_points(axes_of({"train.lr=1,2", "train.lr=3"})); }),
            "sweep: --grid names train.lr twice; give its values in one --grid");
  EXPECT_EQ(error_of([] { grid_points({}); }),
            "sweep: no --grid given; name a key and its values, e.g. --grid train.lr=1e-3,3e-3");
  std::string hundred;
  for (int i = 0; i < 100; ++i) {
    if (i > 0) hundred += ',';
    hundred += std::to_string(i);
  }
  const auto axes = axes_of({"train.steps=" + hundred, "train.warmup=" + hundred, "train.seed=1,2"});
  EXPECT_EQ(error_of([&] { grid_points(axes); }),
            "sweep: the grid has more than 10000 points; list fewer values or draw some with --random N");
  EXPECT_EQ(grid_points(axes_of({"train.steps=" + hundred, "train.warmup=" + hundred})).size(), 10000u);
}

TEST(SweepGrid, RandomPointsAreDistinctInRangeAndRepeatWithTheSeed) {
  const auto axes = axes_of({"train.lr=log:1e-4..1e-2", "train.warmup=10..20", "model.d_model=64,128"});
  const auto points = random_points(axes, 50, 7);
  ASSERT_EQ(points.size(), 50u);
  std::set<std::string> distinct;
  for (const std::string& line : joined(points)) distinct.insert(line);
  EXPECT_EQ(distinct.size(), 50u);
  for (const SweepPoint& point : points) {
    const double lr = std::stod(point[0].value);
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-2);
    const int warmup = std::stoi(point[1].value);
    EXPECT_EQ(point[1].value, std::to_string(warmup));  // an integer range draws integers
    EXPECT_GE(warmup, 10);
    EXPECT_LE(warmup, 20);
    EXPECT_TRUE(point[2].value == "64" || point[2].value == "128");
    // The text passed on reads back as the recorded number.
    EXPECT_EQ(point_params(point)["train.lr"].get<double>(), lr);
  }
  EXPECT_EQ(joined(random_points(axes, 50, 7)), joined(points));
  EXPECT_NE(joined(random_points(axes, 50, 8)), joined(points));
}

TEST(SweepGrid, RandomOverListsDrawsDistinctCombinationsUpToAll) {
  const auto axes = axes_of({"train.lr=1,2,3", "train.warmup=4,5"});
  const auto all = random_points(axes, 6, 1);
  std::set<std::string> distinct;
  for (const std::string& line : joined(all)) distinct.insert(line);
  EXPECT_EQ(distinct.size(), 6u);
  EXPECT_EQ(error_of([&] { random_points(axes, 7, 1); }),
            "sweep: --random 7 asks for more points than the grid's 6 combinations");
  EXPECT_EQ(error_of([&] { random_points(axes, 0, 1); }), "sweep: --random takes 1 to 10000 points, got 0");
  EXPECT_EQ(error_of([&] { random_points(axes_of({"train.warmup=1..2"}), 3, 1); }),
            "sweep: drew only 2 distinct points of the 3 asked for; widen the ranges");
}

}  // namespace
}  // namespace kiln
