// A sweep's points (kiln sweep, docs/sweeps.md): each --grid names a config key and the values
// it takes, as a list (`train.lr=1e-3,3e-3`) or, for random search, a range drawn per point
// (`train.lr=log:1e-4..1e-2`, `train.warmup=10..100`). A grid is the cartesian product of its
// lists; a random sweep draws N distinct points from a recorded seed. Each point is a list of
// `key=value` overrides that `kiln train --set` applies to the base config. The values are kept
// as text, exactly as they are passed on, so a recorded point relaunches identically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln {

// The most points one sweep may have: each is a training run and a row in the store.
inline constexpr int64_t kMaxSweepPoints = 10000;

// lo..hi (uniform) or log:lo..hi (log-uniform, lo > 0). Integer bounds draw integers.
struct SweepRange {
  double lo = 0;
  double hi = 0;
  bool log = false;
  bool integer = false;
};

struct SweepAxis {
  std::string key;                  // section.key
  std::vector<std::string> values;  // the listed values, as written; empty for a range
  std::optional<SweepRange> range;
};

struct SweepParam {
  std::string key;
  std::string value;  // as `--set key=value` takes it
};
using SweepPoint = std::vector<SweepParam>;  // one value per axis, in the axes' order

// One --grid argument. A malformed one is a kiln::Error naming it: no '=', a key that is not
// section.key, an empty or repeated value, a range whose bounds are not numbers or are out of
// order, log of a bound <= 0.
SweepAxis parse_sweep_axis(std::string_view text);

// Every combination of the axes' lists, the first axis varying slowest. Refuses an axis that
// is a range (ranges need random sampling), a key given twice, and more than kMaxSweepPoints.
std::vector<SweepPoint> grid_points(const std::vector<SweepAxis>& axes);

// `count` distinct points drawn from `seed`: a list axis takes one of its values, a range axis
// a number in its range. The same axes and seed give the same points. Refuses a count outside
// 1..kMaxSweepPoints, one past the distinct points the lists allow, and a key given twice.
std::vector<SweepPoint> random_points(const std::vector<SweepAxis>& axes, int64_t count, uint64_t seed);

// The point as --set arguments: "train.lr=0.001".
std::vector<std::string> point_overrides(const SweepPoint& point);
// The point as a JSON object in the axes' order, each value read as --set reads it (JSON, else
// text): {"train.lr": 0.001, "model.d_model": 128}.
nlohmann::ordered_json point_params(const SweepPoint& point);

}  // namespace kiln
