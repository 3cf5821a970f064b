// Resolving what a user typed for a run or a sweep (an id, a name, or an unambiguous prefix of
// one name): one resolver, told the table and the noun. resolve_run (store/run_queries.h) and
// resolve_sweep (store/sweep_queries.h) are it for their tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/database.h"

namespace kiln::store {

// A table of rows with a unique `name` that users name by id, name or prefix.
struct NamedRows {
  const char* table;      // "runs"; also the plural in messages
  const char* noun;       // "run"
  const char* list_hint;  // after "it holds N runs; ": where to see them
  // Names are never all digits, so such text is an id. When it names no row, runs refuse it as
  // an unknown id; sweeps go on to look it up as a name, prefix and near miss.
  bool digits_may_name = false;
};

// The id of the row `text` names: an id, an exact name, or a prefix of one name alone. An
// unknown or ambiguous one is an error that lists the candidates.
int64_t resolve_named(Database& db, std::string_view text, const NamedRows& rows);

// The pieces of that resolution, for a caller that resolves across several stores (the
// dashboard over several, monitor/server/run_address.h) and names the candidates itself.
struct NamedRow {
  int64_t id = 0;
  std::string name;
};
// The row with exactly this name, if there is one.
std::optional<int64_t> row_named(Database& db, std::string_view name, const NamedRows& rows);
// The rows whose name starts with `prefix` (an exact name among them), oldest first, at
// most `limit` of them.
std::vector<NamedRow> rows_named_from(Database& db, std::string_view prefix, const NamedRows& rows, size_t limit);
// The rows whose name holds `text`, ignoring case, newest first, at most `limit`: the near
// misses an unknown name's error suggests.
std::vector<NamedRow> rows_named_like(Database& db, std::string_view text, const NamedRows& rows, size_t limit);

}  // namespace kiln::store
