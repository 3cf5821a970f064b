// The columns a spread field takes in a row of either spread table (a step's in
// metric_spread.h, a block's in spread_blocks.h): the metric list's kSpreadColumns, named in
// SQL, bound from a FieldSpread and read back into one. Both tables' readers and writers go
// through here, so the columns are spelled once.
#pragma once

#include <cstddef>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "store/database.h"
#include "store/metric_fields.h"
#include "store/metric_spread.h"

namespace kiln::store {

using SpreadFieldList = std::span<const MetricField* const>;

inline constexpr int kColumnsPerSpread = static_cast<int>(std::size(kSpreadColumns));

// "fwd_ms_min, fwd_ms_max, ..." for the fields, in the list's and kSpreadColumns' order.
std::string spread_column_list(SpreadFieldList fields);
// ", ?" for each of those columns.
std::string spread_placeholders(SpreadFieldList fields);

// Binds each spread to its columns, parameters from `first` on; an absent one binds NULLs.
void bind_spreads(Statement& st, int first, std::span<const FieldSpread> spreads);
// The spread in the columns from `first` on; a NULL count (no rank had a value) reads absent.
FieldSpread read_spread(const Statement& st, int first);
// `fields` spreads in a row, from column `first` on.
std::vector<FieldSpread> read_spreads(const Statement& st, int first, size_t fields);

}  // namespace kiln::store
