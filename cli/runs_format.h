// Text helpers shared by the `kiln runs` subcommands: aligned tables, local times, compact
// numbers, and reading --since.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "store/run_overview.h"

namespace kiln {

// A plain-text table: a header row, then rows, columns separated by two spaces. Numeric
// columns are right-aligned so their digits line up; the last column is never padded.
class Table {
 public:
  enum class Align { Left, Right };
  struct Column {
    std::string header;
    Align align = Align::Left;
  };

  explicit Table(std::vector<Column> columns);
  // A row of exactly one cell per column.
  void add(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  // Every line ends with '\n'; `indent` spaces start each line.
  void print(std::FILE* out, size_t indent = 0) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

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
std::string join(const std::vector<std::string>& items, std::string_view separator);

// What --since accepts: an ISO date "2026-11-20" (local midnight), a date-time
// "2026-11-20T14:00" or "2026-11-20 14:00[:SS]" (local), or an age "30m", "2h", "3d", "1w"
// counted back from now_s. Anything else is a kiln::Error that shows the three forms.
double parse_since(std::string_view text, double now_s);

}  // namespace kiln
