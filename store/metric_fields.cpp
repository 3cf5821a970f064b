#include "store/metric_fields.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/overloaded.h"
#include "store/error.h"
#include "store/metric_superblocks.h"

namespace kiln::store {
namespace {

// A new aggregate that says "no value" (metric_blocks.h's encoding: NaN min, max and last,
// step and time 0), as SQL blob text.
constexpr const char* kAbsentAggregate =
    "X'000000000000F87F000000000000F87F000000000000F87F00000000000000000000000000000000'";

// The tables of the spread across ranks, and the versions that created them: each holds the
// kSpreadColumns of every spread field.
struct SpreadTable {
  const char* name;
  int since;
};
constexpr SpreadTable kSpreadTables[] = {{"metric_spread", kSpreadSince}, {"spread_blocks", kSpreadBlocksSince}};

// A PerRank field's columns in a spread table, as ADD COLUMN statements.
std::string spread_columns(const char* table, const MetricField& f) {
  std::string sql;
  for (const SpreadColumn& c : kSpreadColumns)
    sql += "ALTER TABLE " + std::string(table) + " ADD COLUMN " + std::string(f.name) + std::string(c.suffix) + " " +
           std::string(c.sql_type) + ";\n";
  return sql;
}

bool is_spread_field(const MetricField& f) { return f.spread == RankSpread::PerRank && !is_row_key(f); }

}  // namespace

const MetricField* find_metric_field(std::string_view name) {
  const auto* f = std::find_if(std::begin(kMetricFields), std::end(kMetricFields),
                               [&](const MetricField& field) { return field.name == name; });
  return f == std::end(kMetricFields) ? nullptr : f;
}

std::span<const MetricField* const> block_fields() {
  static const std::vector<const MetricField*> ordered = [] {
    std::vector<const MetricField*> out;
    for (const MetricField& f : kMetricFields)
      if (f.block_slot >= 0) out.push_back(&f);
    std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) { return a->block_slot < b->block_slot; });
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i]->block_slot != static_cast<int>(i))
        fail("store: metric block slots must be 0.." + std::to_string(out.size() - 1) + " once each; '" +
             std::string(out[i]->name) + "' has " + std::to_string(out[i]->block_slot));
    return out;
  }();
  return ordered;
}

std::span<const MetricField* const> spread_fields() {
  static const std::vector<const MetricField*> fields = [] {
    std::vector<const MetricField*> out;
    for (const MetricField& f : kMetricFields)
      if (is_spread_field(f)) out.push_back(&f);
    return out;
  }();
  return fields;
}

std::vector<const MetricField*> spread_fields_at(int version) {
  std::vector<const MetricField*> out;
  for (const MetricField* f : spread_fields())
    if (f->since <= version) out.push_back(f);
  return out;
}

const std::string& metric_column_list() {
  static const std::string columns = [] {
    std::string out;
    for (const MetricField& f : kMetricFields) out += (out.empty() ? "" : ", ") + std::string(f.name);
    return out;
  }();
  return columns;
}

std::string metric_columns_added_in(int version) {
  std::string sql;
  if (version <= 1) return sql;
  // A spread table is created by its version, with the columns of the fields before it.
  for (const SpreadTable& table : kSpreadTables)
    if (version == table.since)
      for (const MetricField* f : spread_fields())
        if (f->since < table.since) sql += spread_columns(table.name, *f);
  for (const MetricField& f : kMetricFields) {
    if (f.since != version) continue;
    sql += "ALTER TABLE metrics ADD COLUMN " + std::string(f.name) + (is_integer_metric(f) ? " INTEGER;\n" : " REAL;\n");
    // Its aggregate goes last in every block written before, as its slot does in the list.
    if (f.block_slot >= 0) sql += "UPDATE metric_blocks SET aggregates = aggregates || " + std::string(kAbsentAggregate) + ";\n";
    if (f.block_slot >= 0 && f.since > kSuperblocksSince)
      sql += "UPDATE metric_superblocks SET aggregates = aggregates || " + std::string(kAbsentAggregate) + ";\n";
    if (is_spread_field(f))
      for (const SpreadTable& table : kSpreadTables)
        if (f.since >= table.since) sql += spread_columns(table.name, f);
  }
  return sql;
}

double metric_value(const MetricRow& row, const MetricField& field) {
  return std::visit(Overloaded{[&](int64_t MetricRow::*m) { return static_cast<double>(row.*m); },
                               [&](int MetricRow::*m) { return static_cast<double>(row.*m); },
                               // -0 reads back as 0: SQLite stores an integral REAL as an integer.
                               [&](double MetricRow::*m) { return row.*m + 0.0; },
                               [&](std::optional<int64_t> MetricRow::*m) {
                                 return row.*m ? static_cast<double>(*(row.*m)) : kNoValue;
                               }},
                    field.member);
}

void set_metric_value(MetricRow& row, const MetricField& field, double value) {
  std::visit(Overloaded{[&](int64_t MetricRow::*m) { row.*m = static_cast<int64_t>(value); },
                        [&](int MetricRow::*m) { row.*m = static_cast<int>(value); },
                        [&](double MetricRow::*m) { row.*m = value; },
                        [&](std::optional<int64_t> MetricRow::*m) {
                          row.*m = std::isnan(value) ? std::nullopt : std::optional<int64_t>(static_cast<int64_t>(value));
                        }},
             field.member);
}

bool is_integer_metric(const MetricField& field) { return !std::holds_alternative<double MetricRow::*>(field.member); }

}  // namespace kiln::store
