// A run's figures as text, the same in `kiln runs` and `kiln tui`: losses, rates,
// percentages, durations, local times and step counts, with "-" for a value that is absent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/run_overview.h"

namespace kiln {

// Placeholder for a value that is absent (NaN, nullopt, empty text).
inline constexpr const char* kAbsent = "-";

// The last logged step of the planned ones, "120/1000" ("120" without a plan, "-/1000"
// before the first log).
std::string steps_text(const store::RunOverview& r);

// Unix seconds as local time, "2026-11-22 14:05" (minutes) or "2026-11-22 14:05:09".
std::string local_minute(double unix_s);
std::string local_second(double unix_s);

// "2.3456" (loss-like figures: 4 decimals), "-" when NaN.
std::string fixed4(double value);
// Throughput without false precision: "950", "12.3k", "4.56M"; "-" when NaN.
std::string compact_rate(double value);
// A 0..1 fraction as a percentage, "41.2%"; "-" when NaN.
std::string percent(double fraction);
// A number as short as it reads back exactly (3e-4 -> "0.0003"); "-" when NaN.
std::string shortest(double value);
// human_duration, or "-" when NaN or negative.
std::string duration_or_absent(double seconds);
// human_bytes, "34.2 MiB", or "-" when absent.
std::string bytes_or_absent(const std::optional<int64_t>& bytes);
std::string join(const std::vector<std::string>& items, std::string_view separator);

}  // namespace kiln
