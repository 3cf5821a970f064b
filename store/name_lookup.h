// Resolving what a user typed for a run or a sweep (an id, a name, or an unambiguous prefix of
// one name): one resolver, told the table and the noun. resolve_run (store/run_queries.h) and
// resolve_sweep (store/sweep_queries.h) are it for their tables.
#pragma once

#include <cstdint>
#include <string_view>

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

}  // namespace kiln::store
