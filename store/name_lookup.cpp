#include "store/name_lookup.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>

#include "base/check.h"

namespace kiln::store {
namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "a (id 1), b (id 2)" for the first `limit` rows of (id, name) the statement yields, and how
// many more there were.
std::string candidates(Statement& st, size_t limit) {
  std::string text;
  size_t n = 0;
  while (st.step())
    if (n++ < limit) text += (text.empty() ? "" : ", ") + st.text(1) + " (id " + std::to_string(st.int64(0)) + ")";
  if (n > limit) text += ", and " + std::to_string(n - limit) + " more";
  return text;
}

// The first id `st` yields, if any; the statement is left reset.
std::optional<int64_t> first_id(Statement& st) {
  if (!st.step()) return std::nullopt;
  const int64_t id = st.int64(0);
  st.reset();
  return id;
}

}  // namespace

int64_t resolve_named(Database& db, std::string_view typed, const NamedRows& rows) {
  const std::string table = rows.table, noun = rows.noun;
  if (typed.empty()) fail("store: no " + noun + " given (an id or a name)");
  const std::string text(typed);
  if (all_digits(text)) {
    // More than 18 digits is past int64: no row has that id.
    if (text.size() <= 18) {
      Statement& st = db.cached("SELECT id FROM " + table + " WHERE id = ?");
      st.bind(1, static_cast<int64_t>(std::stoll(text)));
      if (const auto id = first_id(st)) return *id;
    }
    if (!rows.digits_may_name) fail("store: no " + noun + " with id " + text + " in " + db.path());
  }
  Statement& exact = db.cached("SELECT id FROM " + table + " WHERE name = ?");
  exact.bind(1, text);
  if (const auto id = first_id(exact)) return *id;
  Statement& prefix =
      db.cached("SELECT id, name FROM " + table + " WHERE substr(name, 1, length(?1)) = ?1 ORDER BY id");
  prefix.bind(1, text);
  if (prefix.step()) {
    const int64_t first = prefix.int64(0);
    if (!prefix.step()) {
      prefix.reset();
      return first;
    }
    prefix.reset();
    prefix.bind(1, text);
    fail("store: " + noun + " '" + text + "' is ambiguous: " + candidates(prefix, 8) +
         "; give the full name or the id");
  }
  Statement& similar =
      db.cached("SELECT id, name FROM " + table + " WHERE instr(lower(name), lower(?)) > 0 ORDER BY id DESC");
  similar.bind(1, text);
  const std::string near = candidates(similar, 5);
  if (!near.empty())
    fail("store: no " + noun + " named '" + text + "' in " + db.path() + "; did you mean " + near + "?");
  const int64_t count = db.query_int("SELECT count(*) FROM " + table);
  fail("store: no " + noun + " named '" + text + "' in " + db.path() +
       (count == 0 ? " (it holds no " + table + ")"
                   : " (it holds " + std::to_string(count) + " " + table + "; " + rows.list_hint + ")"));
}

std::optional<int64_t> row_named(Database& db, std::string_view name, const NamedRows& rows) {
  Statement& st = db.cached("SELECT id FROM " + std::string(rows.table) + " WHERE name = ?");
  st.bind(1, name);
  return first_id(st);
}

std::vector<NamedRow> rows_named_from(Database& db, std::string_view prefix, const NamedRows& rows, size_t limit) {
  Statement& st = db.cached("SELECT id, name FROM " + std::string(rows.table) +
                            " WHERE substr(name, 1, length(?1)) = ?1 ORDER BY id LIMIT ?2");
  st.bind(1, std::string(prefix)).bind(2, static_cast<int64_t>(limit));
  std::vector<NamedRow> found;
  while (st.step()) found.push_back({st.int64(0), st.text(1)});
  return found;
}

std::vector<NamedRow> rows_named_like(Database& db, std::string_view text, const NamedRows& rows, size_t limit) {
  Statement& st = db.cached("SELECT id, name FROM " + std::string(rows.table) +
                            " WHERE instr(lower(name), lower(?1)) > 0 ORDER BY id DESC LIMIT ?2");
  st.bind(1, std::string(text)).bind(2, static_cast<int64_t>(limit));
  std::vector<NamedRow> found;
  while (st.step()) found.push_back({st.int64(0), st.text(1)});
  return found;
}

}  // namespace kiln::store
