#include "trainer/config/sweep_grid.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {
namespace {

// Splits at the commas outside brackets and quotes, so a JSON array value stays one value:
// data.paths=["a","b"],["c"].
std::vector<std::string> split_values(std::string_view text) {
  std::vector<std::string> values(1);
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\' && i + 1 < text.size()) values.back() += text[i++];
      else if (c == '"') quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      values.emplace_back();
      continue;
    }
    values.back() += c;
  }
  return values;
}

std::optional<double> number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno != 0 || !std::isfinite(value)) return std::nullopt;
  return value;
}

bool is_integer_text(const std::string& text) {
  const size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
  return text.size() > start && text.find_first_not_of("0123456789", start) == std::string::npos &&
         text.size() - start <= 15;
}

SweepRange parse_range(const std::string& axis, std::string_view spec, bool log) {
  const size_t dots = spec.find("..");
  if (dots == spec.npos)
    fail("sweep: --grid " + axis + ": a range is lo..hi or log:lo..hi, e.g. train.lr=log:1e-4..1e-2");
  const std::string lo_text(spec.substr(0, dots)), hi_text(spec.substr(dots + 2));
  const auto lo = number(lo_text), hi = number(hi_text);
  if (!lo || !hi) fail("sweep: --grid " + axis + ": the range's bounds must be numbers");
  if (!(*lo < *hi)) fail("sweep: --grid " + axis + ": the range's low bound must be below its high bound");
  if (log && *lo <= 0) fail("sweep: --grid " + axis + ": a log range needs bounds above 0");
  return SweepRange{*lo, *hi, log, is_integer_text(lo_text) && is_integer_text(hi_text)};
}

void require_distinct_keys(const std::vector<SweepAxis>& axes) {
  std::set<std::string> keys;
  for (const SweepAxis& axis : axes)
    if (!keys.insert(axis.key).second) fail("sweep: --grid names " + axis.key + " twice; give its values in one --grid");
  if (axes.empty()) fail("sweep: no --grid given; name a key and its values, e.g. --grid train.lr=1e-3,3e-3");
}

// The product of the lists' sizes, or kMaxSweepPoints + 1 once it passes the bound.
int64_t combinations(const std::vector<SweepAxis>& axes) {
  int64_t total = 1;
  for (const SweepAxis& axis : axes) {
    total *= static_cast<int64_t>(axis.values.size());
    if (total > kMaxSweepPoints) return kMaxSweepPoints + 1;
  }
  return total;
}

// A uniform double in [0, 1) from 53 of the generator's bits: the same on every platform
// (std::uniform_real_distribution's algorithm is the library's choice).
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::string draw(const SweepRange& range, std::mt19937_64& rng) {
  if (range.integer && !range.log) {
    const auto lo = static_cast<int64_t>(range.lo);
    const auto span = static_cast<uint64_t>(range.hi - range.lo) + 1;
    return std::to_string(lo + static_cast<int64_t>(rng() % span));
  }
  const double u = unit(rng);
  const double value = range.log ? std::exp(std::log(range.lo) + u * (std::log(range.hi) - std::log(range.lo)))
                                 : range.lo + u * (range.hi - range.lo);
  if (range.integer) return std::to_string(std::llround(std::clamp(value, range.lo, range.hi)));
  return fmt::format("{}", value);  // the shortest text that reads back as the same double
}

std::string point_key(const SweepPoint& point) {
  std::string key;
  for (const SweepParam& p : point) key += p.key + '=' + p.value + '\n';
  return key;
}

}  // namespace

SweepAxis parse_sweep_axis(std::string_view text) {
  const std::string shown(text);
  const size_t eq = text.find('=');
  if (eq == text.npos)
    fail("sweep: --grid " + shown + " has no '='; write section.key=v1,v2 or section.key=lo..hi");
  SweepAxis axis;
  axis.key = std::string(text.substr(0, eq));
  const size_t dot = axis.key.find('.');
  // Further dots name a key within objects of the section (finetune.lora.rank).
  if (dot == axis.key.npos || dot == 0 || axis.key.back() == '.' || axis.key.find("..") != axis.key.npos)
    fail("sweep: --grid " + shown + " must name section.key before '=', e.g. train.lr=1e-3,3e-3");
  const std::string_view spec = text.substr(eq + 1);
  if (spec.starts_with("log:")) {
    axis.range = parse_range(shown, spec.substr(4), true);
    return axis;
  }
  const std::vector<std::string> values = split_values(spec);
  if (values.size() == 1 && spec.find("..") != spec.npos && number(std::string(spec.substr(0, spec.find("..")))))
    axis.range = parse_range(shown, spec, false);
  else
    for (const std::string& value : values) {
      if (value.empty()) fail("sweep: --grid " + shown + " has an empty value");
      for (const std::string& seen : axis.values)
        if (seen == value) fail("sweep: --grid " + shown + " lists " + value + " twice");
      axis.values.push_back(value);
    }
  return axis;
}

std::vector<SweepPoint> grid_points(const std::vector<SweepAxis>& axes) {
  require_distinct_keys(axes);
  for (const SweepAxis& axis : axes)
    if (axis.range) fail("sweep: --grid " + axis.key + " is a range, which only --random N draws from; list its values instead");
  const int64_t total = combinations(axes);
  if (total > kMaxSweepPoints)
    fail(fmt::format("sweep: the grid has more than {} points; list fewer values or draw some with --random N", kMaxSweepPoints));
  std::vector<SweepPoint> points;
  points.reserve(static_cast<size_t>(total));
  for (int64_t index = 0; index < total; ++index) {
    SweepPoint point(axes.size());
    int64_t rest = index;
    for (size_t a = axes.size(); a-- > 0;) {  // the last axis varies fastest
      const auto n = static_cast<int64_t>(axes[a].values.size());
      point[a] = SweepParam{axes[a].key, axes[a].values[static_cast<size_t>(rest % n)]};
      rest /= n;
    }
    points.push_back(std::move(point));
  }
  return points;
}

std::vector<SweepPoint> random_points(const std::vector<SweepAxis>& axes, int64_t count, uint64_t seed) {
  require_distinct_keys(axes);
  if (count < 1 || count > kMaxSweepPoints)
    fail(fmt::format("sweep: --random takes 1 to {} points, got {}", kMaxSweepPoints, count));
  bool any_range = false;
  for (const SweepAxis& axis : axes) any_range = any_range || axis.range.has_value();
  if (!any_range && combinations(axes) < count)
    fail(fmt::format("sweep: --random {} asks for more points than the grid's {} combinations", count,
                     combinations(axes)));
  std::mt19937_64 rng(seed);
  std::set<std::string> seen;
  std::vector<SweepPoint> points;
  // Distinct draws: a list-only grid close to full needs a few passes, bounded all the same.
  for (int64_t attempt = 0; static_cast<int64_t>(points.size()) < count; ++attempt) {
    if (attempt > 100 * count + 1000)
      fail(fmt::format("sweep: drew only {} distinct points of the {} asked for; widen the ranges", points.size(), count));
    SweepPoint point;
    for (const SweepAxis& axis : axes)
      point.push_back({axis.key, axis.range ? draw(*axis.range, rng) : axis.values[rng() % axis.values.size()]});
    if (seen.insert(point_key(point)).second) points.push_back(std::move(point));
  }
  return points;
}

std::vector<std::string> point_overrides(const SweepPoint& point) {
  std::vector<std::string> overrides;
  for (const SweepParam& p : point) overrides.push_back(p.key + '=' + p.value);
  return overrides;
}

nlohmann::ordered_json point_params(const SweepPoint& point) {
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
  for (const SweepParam& p : point) {
    nlohmann::ordered_json value = nlohmann::ordered_json::parse(p.value, nullptr, false);
    params[p.key] = value.is_discarded() ? nlohmann::ordered_json(p.value) : std::move(value);
  }
  return params;
}

}  // namespace kiln
