#include "cli/runs_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>

#include <fmt/core.h>

#include "base/check.h"
#include "base/terminal_text.h"

namespace kiln {
namespace {

[[noreturn]] void bad_since(std::string_view text) {
  fail(fmt::format("--since '{}' is not a date (2026-11-20), a date-time (2026-11-20T14:00) "
                   "or an age (30m, 2h, 3d)",
                   text));
}

// "30m" -> 1800. Units: s, m, h, d, w.
std::optional<double> parse_age(std::string_view text) {
  if (text.size() < 2) return std::nullopt;
  double seconds_per_unit = 0;
  switch (text.back()) {
    case 's': seconds_per_unit = 1; break;
    case 'm': seconds_per_unit = 60; break;
    case 'h': seconds_per_unit = 3600; break;
    case 'd': seconds_per_unit = 86400; break;
    case 'w': seconds_per_unit = 7 * 86400; break;
    default: return std::nullopt;
  }
  const std::string_view number = text.substr(0, text.size() - 1);
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value) ||
      value < 0)
    return std::nullopt;
  return value * seconds_per_unit;
}

// A local date or date-time; mktime normalises out-of-range fields (Feb 30 -> Mar 2), so a
// date that does not come back unchanged did not exist.
std::optional<double> parse_local_time(std::string_view text) {
  const std::string s(text);
  std::tm tm{};
  int consumed = 0;
  char separator = 0;
  if (s.size() == 10) {
    if (std::sscanf(s.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &consumed) != 3)
      return std::nullopt;
  } else if (std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                         &separator, &tm.tm_hour, &tm.tm_min, &consumed) == 6) {
    if (separator != 'T' && separator != ' ') return std::nullopt;
    if (static_cast<size_t>(consumed) < s.size()) {
      int more = 0;
      if (std::sscanf(s.c_str() + consumed, ":%2d%n", &tm.tm_sec, &more) != 1) return std::nullopt;
      consumed += more;
    }
  } else {
    return std::nullopt;
  }
  if (static_cast<size_t>(consumed) != s.size()) return std::nullopt;
  const std::tm wanted = tm;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1) || tm.tm_year + 1900 != wanted.tm_year ||
      tm.tm_mon + 1 != wanted.tm_mon || tm.tm_mday != wanted.tm_mday ||
      tm.tm_hour != wanted.tm_hour || tm.tm_min != wanted.tm_min || tm.tm_sec != wanted.tm_sec)
    return std::nullopt;
  return static_cast<double>(t);
}

}  // namespace

// Headers and cells hold what users and models wrote (run names, tags, notes, reasons): shown,
// never obeyed.
Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {
  for (Column& column : columns_) column.header = terminal_line(column.header);
}

void Table::add(std::vector<std::string> cells) {
  KILN_CHECK(cells.size() == columns_.size(), "table: a row needs one cell per column");
  for (std::string& cell : cells) cell = terminal_line(cell);
  rows_.push_back(std::move(cells));
}

void Table::print(std::FILE* out, size_t indent) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].header.size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  const auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line(indent, ' ');
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool last = c + 1 == cells.size();
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (columns_[c].align == Align::Right)
        line += pad + cells[c];
      else
        line += last ? cells[c] : cells[c] + pad;
      if (!last) line += "  ";
    }
    fmt::print(out, "{}\n", line);
  };
  std::vector<std::string> header;
  for (const auto& column : columns_) header.push_back(column.header);
  print_row(header);
  for (const auto& row : rows_) print_row(row);
}

double parse_since(std::string_view text, double now_s) {
  if (const auto age = parse_age(text)) return now_s - *age;
  if (const auto time = parse_local_time(text)) return *time;
  bad_since(text);
}

}  // namespace kiln
