#include "base/human_format.h"

#include <cmath>
#include <ctime>
#include <iterator>

#include <fmt/core.h>

namespace kiln {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string human_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string local_time_text(double unix_seconds, const char* format) {
  const auto t = static_cast<std::time_t>(std::floor(unix_seconds));
  std::tm local{};
  localtime_r(&t, &local);
  char text[64];
  return std::strftime(text, sizeof text, format, &local) ? text : "";
}

}  // namespace kiln
