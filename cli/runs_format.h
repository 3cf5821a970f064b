// Text helpers of the `kiln runs` subcommands: aligned plain-text tables and reading --since.
// The figures in the tables come from monitor/format/, which `kiln tui` shares.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// A plain-text table: a header row, then rows, columns separated by two spaces. Numeric
// columns are right-aligned so their digits line up; the last column is never padded.
// Control characters in a header or cell are shown as escapes (base/terminal_text.h).
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

// What --since accepts: an ISO date "2026-11-20" (local midnight), a date-time
// "2026-11-20T14:00" or "2026-11-20 14:00[:SS]" (local), or an age "30m", "2h", "3d", "1w"
// counted back from now_s. Anything else is a kiln::Error that shows the three forms.
double parse_since(std::string_view text, double now_s);

}  // namespace kiln
