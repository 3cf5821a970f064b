#include "monitor/format/figures.h"

#include <cmath>

#include <fmt/core.h>

#include "base/human_format.h"

namespace kiln {
namespace {

std::string local_time(double unix_s, const char* format) {
  if (std::isnan(unix_s)) return kAbsent;
  const std::string text = local_time_text(unix_s, format);
  return text.empty() ? kAbsent : text;
}

}  // namespace

std::string steps_text(const store::RunOverview& r) {
  const std::string last = r.run.last_step ? std::to_string(*r.run.last_step) : kAbsent;
  return r.planned_steps ? last + "/" + std::to_string(*r.planned_steps) : last;
}

std::string local_minute(double unix_s) { return local_time(unix_s, "%Y-%m-%d %H:%M"); }

std::string local_second(double unix_s) { return local_time(unix_s, "%Y-%m-%d %H:%M:%S"); }

std::string fixed4(double value) {
  return std::isnan(value) ? kAbsent : fmt::format("{:.4f}", value);
}

std::string compact_rate(double value) {
  if (std::isnan(value)) return kAbsent;
  if (std::fabs(value) < 1e3) return fmt::format("{:.0f}", value);
  if (std::fabs(value) < 1e6) return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.2f}M", value / 1e6);
}

std::string percent(double fraction) {
  return std::isnan(fraction) ? kAbsent : fmt::format("{:.1f}%", 100 * fraction);
}

std::string shortest(double value) {
  return std::isnan(value) ? kAbsent : fmt::format("{}", value);
}

std::string duration_or_absent(double seconds) {
  return std::isnan(seconds) || seconds < 0 ? kAbsent : human_duration(seconds);
}

std::string bytes_or_absent(const std::optional<int64_t>& bytes) {
  return bytes ? human_bytes(static_cast<uint64_t>(*bytes)) : kAbsent;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += separator;
    text += items[i];
  }
  return text;
}

}  // namespace kiln
