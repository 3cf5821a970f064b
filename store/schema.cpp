#include "store/schema.h"

#include <sqlite3.h>

#include <string>

#include "store/error.h"
#include "store/metric_fields.h"
#include "store/user_text.h"

namespace kiln::store {
namespace {

std::string other_tables(Database& db) {
  std::string names;
  Statement st(db, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name LIMIT 4");
  while (st.step()) names += (names.empty() ? "" : ", ") + st.text(0);
  return names;
}

// Refuses files that are not ours or are newer than this binary; true if it is current.
bool check_version(Database& db, int version, int target) {
  const int64_t app_id = db.query_int("PRAGMA application_id");
  if (app_id != 0 && app_id != kApplicationId)
    fail("store: " + db.path() + " is not a kiln run store (it belongs to another program)");
  if (version == 0 && app_id == 0) {
    const std::string tables = other_tables(db);
    if (!tables.empty())
      fail("store: " + db.path() + " is not a kiln run store (it holds other tables: " +
           tables + ")");
  }
  if (version > target)
    fail("store: " + db.path() + " has schema version " + std::to_string(version) +
         ", newer than this kiln's " + std::to_string(target) + "; upgrade kiln");
  return version == target;
}

void redact_command_line_sql(sqlite3_context* context, int, sqlite3_value** argv) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const std::string redacted =
      redact_command_line(text ? std::string_view(text, static_cast<size_t>(sqlite3_value_bytes(argv[0])))
                               : std::string_view());
  sqlite3_result_text64(context, redacted.data(), redacted.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
}

// The SQL functions migrations may call, on this connection only.
void register_migration_functions(Database& db) {
  const int rc = sqlite3_create_function_v2(db.handle(), "kiln_redact_command_line", 1,
                                            SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
                                            redact_command_line_sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) db.raise(rc);
}

}  // namespace

void migrate(Database& db, std::span<const Migration> steps) {
  const int target = static_cast<int>(steps.size());
  int version = static_cast<int>(db.query_int("PRAGMA user_version"));
  if (check_version(db, version, target)) return;

  if (db.access() == Access::ReadOnly) {
    if (version == 0) fail("store: " + db.path() + " holds no kiln runs yet (an empty store)");
    fail("store: " + db.path() + " has schema version " + std::to_string(version) +
         ", older than this kiln's " + std::to_string(target) +
         "; open it once for writing (any kiln command that records runs) to upgrade it");
  }

  // A step may rebuild a table others refer to (SQLite's way to change a constraint), and
  // with foreign keys on, dropping the old table would delete every row that refers to it.
  // They are off for the migration (the pragma is a no-op inside a transaction, so before
  // it), checked once before the commit, and on again whatever happens.
  db.exec("PRAGMA foreign_keys = OFF");
  struct ForeignKeysBackOn {
    Database& db;
    ~ForeignKeysBackOn() { sqlite3_exec(db.handle(), "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr); }
  } back_on{db};
  // One transaction for every step: a crash mid-way leaves the old version intact. The
  // version is read again under the write lock, in case another process migrated first.
  Transaction tx(db);
  version = static_cast<int>(db.query_int("PRAGMA user_version"));
  if (check_version(db, version, target)) return;
  register_migration_functions(db);
  for (int k = version; k < target; ++k) {
    db.exec(steps[static_cast<size_t>(k)].sql);
    // The metric columns of version k + 1 come from the one metric list, after its own SQL.
    const std::string metric_columns = metric_columns_added_in(k + 1);
    if (!metric_columns.empty()) db.exec(metric_columns);
    if (steps[static_cast<size_t>(k)].then) steps[static_cast<size_t>(k)].then(db);
  }
  {
    Statement broken(db, "PRAGMA foreign_key_check");
    if (broken.step())
      fail("store: migrating " + db.path() + " would break a reference from table " +
           broken.text(0) + "; nothing was changed");
  }
  db.exec("PRAGMA user_version = " + std::to_string(target));
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  tx.commit();
}

std::unique_ptr<Database> open_store(const std::string& path, Access access,
                                     int busy_timeout_ms) {
  auto db = std::make_unique<Database>(path, access, busy_timeout_ms);
  migrate(*db, migrations());
  if (access == Access::ReadWrite) db->use_wal();
  return db;
}

}  // namespace kiln::store
