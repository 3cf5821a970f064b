#include "trainer/steer/setting.h"

#include <charconv>
#include <cmath>

#include <fmt/core.h>

#include "kernels/check.h"

namespace kiln {
namespace {

enum class Range { Positive, Count, CountOrZero };

struct HotKey {
  std::string_view key;
  Range range;
};

constexpr HotKey kHotKeys[] = {
    {"train.lr", Range::Positive},
    {"train.lr_scale", Range::Positive},
    {"train.log_interval", Range::Count},
    {"train.eval_interval", Range::CountOrZero},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

std::string hot_settings() {
  std::string out;
  for (const HotKey& k : kHotKeys) out += (out.empty() ? "" : ", ") + std::string(k.key);
  return out;
}

Setting parse_setting(std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos)
    fail(fmt::format("setting '{}' is not key=value (keys: {})", assignment, hot_settings()));
  const std::string_view key = trim(assignment.substr(0, eq));
  const std::string_view text = trim(assignment.substr(eq + 1));
  const HotKey* hot = nullptr;
  for (const HotKey& k : kHotKeys)
    if (k.key == key) hot = &k;
  if (!hot)
    fail(fmt::format("{} cannot change during a run; the keys that can are {}", key,
                     hot_settings()));

  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    fail(fmt::format("{}: '{}' is not a number", key, text));
  switch (hot->range) {
    case Range::Positive:
      if (value <= 0) fail(fmt::format("{}: must be greater than 0, got {}", key, text));
      break;
    case Range::Count:
    case Range::CountOrZero:
      if (value != std::floor(value) || value < (hot->range == Range::Count ? 1 : 0) || value > 1e15)
        fail(fmt::format("{}: must be a whole number of steps{}, got {}", key,
                         hot->range == Range::Count ? " of at least 1" : "", text));
      break;
  }
  return {std::string(key), value};
}

}  // namespace kiln
