#include "trainer/steer/setting.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/trim.h"

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
  const std::string_view key = trim_blanks(assignment.substr(0, eq));
  const std::string_view text = trim_blanks(assignment.substr(eq + 1));
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
      if (key == "train.lr_scale" && !lr_scale_problem(value).empty())
        fail(fmt::format("train.lr_scale={} is outside what a run can hold: {}, even with --force", text,
                         lr_scale_problem(value)));
      break;
    case Range::Count:
    case Range::CountOrZero:
      if (value != std::floor(value) || value < (hot->range == Range::Count ? 1 : 0) || value > 1e15)
        fail(fmt::format("{}: must be a whole number of steps{}, got {}", key,
                         hot->range == Range::Count ? " of at least 1" : "", text));
      break;
  }
  return {std::string(key), value, std::string(text)};
}

std::string lr_scale_problem(double scale) {
  if (std::isfinite(scale) && scale > 0 && scale <= kMaxLrScale) return {};
  return fmt::format("above 0 and at most {:g}", kMaxLrScale);
}

SettingLimits setting_limits(std::string_view run_config_json) {
  const auto config = nlohmann::json::parse(run_config_json, nullptr, false);
  SettingLimits limits;
  if (!config.is_object()) return limits;
  const nlohmann::json train = config.value("train", nlohmann::json::object());
  if (!train.is_object()) return limits;
  if (const auto lr = train.find("lr"); lr != train.end() && lr->is_number() && lr->get<double>() > 0)
    limits.peak_lr = lr->get<double>();
  if (const auto steps = train.find("steps"); steps != train.end() && steps->is_number_integer())
    limits.steps = steps->get<int64_t>();
  return limits;
}

void check_setting_range(const Setting& setting, const SettingLimits& limits, std::string_view force_hint) {
  const auto refuse = [&](const std::string& range) {
    fail(fmt::format("{}={} is outside its range: {}; {}", setting.key, setting.text, range, force_hint));
  };
  const bool rate = setting.key == "train.lr" || setting.key == "train.lr_scale";
  if (rate && !std::isnormal(setting.value))
    refuse(fmt::format("a normal number, at least {:g} (this one is denormal)", std::numeric_limits<double>::min()));
  // The bound as typed must pass: 10 x 3e-4 is 0.0029999999999999996 in binary.
  if (setting.key == "train.lr" && limits.peak_lr && setting.value > kMaxLrFactor * *limits.peak_lr * (1 + 1e-12))
    refuse(fmt::format("above 0 and at most {:g} ({:g}x the run's configured peak {:g})",
                       kMaxLrFactor * *limits.peak_lr, kMaxLrFactor, *limits.peak_lr));
  if (setting.key == "train.lr_scale" && setting.value > kMaxLrFactor)
    refuse(fmt::format("above 0 and at most {:g}", kMaxLrFactor));
  const bool interval = setting.key == "train.log_interval" || setting.key == "train.eval_interval";
  if (interval && limits.steps && setting.value > static_cast<double>(*limits.steps))
    refuse(fmt::format("at most the run's train.steps, {}", *limits.steps));
}

void check_setting_holdable(const Setting& setting, const SettingLimits& limits) {
  if (setting.key != "train.lr" || !limits.peak_lr) return;
  if (lr_scale_problem(setting.value / *limits.peak_lr).empty()) return;
  fail(fmt::format("train.lr={} is outside what a run can hold: at most {:g}x the run's configured peak {:g}, even "
                   "with --force",
                   setting.text, kMaxLrScale, *limits.peak_lr));
}

std::string checked_setting(std::string_view assignment, std::string_view run_config_json, bool force,
                            std::string_view force_hint) {
  const Setting setting = parse_setting(assignment);
  const SettingLimits limits = setting_limits(run_config_json);
  check_setting_holdable(setting, limits);
  if (!force) check_setting_range(setting, limits, force_hint);
  return fmt::format("{}={}", setting.key, setting.value);
}

}  // namespace kiln
