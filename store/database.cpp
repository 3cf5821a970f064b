#include "store/database.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "store/error.h"
#include "store/unindexed_read.h"

namespace kiln::store {
namespace {

// One line a user can act on, for a SQLite result code. `detail` is SQLite's own text.
std::string describe(int rc, const std::string& path, const std::string& detail) {
  switch (rc & 0xff) {  // the primary code; extended codes refine it in the low byte's high bits
    case SQLITE_NOTADB:
      return path + " is not a kiln run store (file is not a database)";
    case SQLITE_CORRUPT:
      return path + " is damaged (" + detail +
             "); restore it from a copy, or move it aside and start a new store";
    case SQLITE_FULL:
      return path + ": disk full (" + detail + "); free space and retry";
    case SQLITE_READONLY:
      return path + " is read-only (" + detail + ")";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return path + " is locked by another writer (" + detail + ")";
    case SQLITE_CANTOPEN:
      return "cannot open " + path + " (" + detail +
             "): check that it exists and that its folder is writable";
    case SQLITE_IOERR:
      return path + ": I/O error (" + detail + ")";
    default:
      return path + ": " + detail;
  }
}

// file: URI for a path, escaping what a URI would read as syntax.
std::string file_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[(static_cast<unsigned char>(c) >> 4) & 0xf];
      uri += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      uri += c;
    }
  }
  return uri;
}

}  // namespace

// ---- Statement ----

Statement::Statement(Database& db, std::string_view sql) : db_(db) {
  const int rc = sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) db_.raise(rc);
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) db_.raise(rc);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  // SQLite stores NaN as NULL anyway; saying so here keeps the rule in one place.
  const int rc = std::isnan(value) ? sqlite3_bind_null(stmt_, index)
                                   : sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) db_.raise(rc);
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  const int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                                     SQLITE_UTF8);
  if (rc != SQLITE_OK) db_.raise(rc);
  return *this;
}

Statement& Statement::bind(int index, std::span<const std::byte> value) {
  const int rc = sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.raise(rc);
  return *this;
}

Statement& Statement::bind(int index, std::nullopt_t) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) db_.raise(rc);
  return *this;
}

bool Statement::step() {
  // A statement's first step outside a transaction starts a read (a ReadSnapshot's BEGIN
  // went through exec): the moment to check that the store is still the one opened.
  if (!sqlite3_stmt_busy(stmt_) && sqlite3_get_autocommit(db_.handle())) db_.require_unchanged();
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Take the message before reset: a statement left mid-way would hold its read snapshot.
  const std::string message = "store: " + describe(rc, db_.path(), sqlite3_errmsg(db_.handle()));
  sqlite3_reset(stmt_);
  throw DatabaseError(message, rc);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::real(int column) const {
  return is_null(column) ? std::nan("") : sqlite3_column_double(stmt_, column);
}

std::string Statement::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
           : std::string();
}

std::optional<int64_t> Statement::opt_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

std::optional<double> Statement::opt_real(int column) const {
  if (is_null(column)) return std::nullopt;
  return sqlite3_column_double(stmt_, column);
}

std::span<const std::byte> Statement::blob(int column) const {
  // The pointer, then the size: SQLite's documented safe order.
  const auto* data = static_cast<const std::byte*>(sqlite3_column_blob(stmt_, column));
  const auto size = static_cast<size_t>(sqlite3_column_bytes(stmt_, column));
  return {data, data ? size : 0};
}

// ---- Database ----

Database::Database(std::string path, Access access, int busy_timeout_ms)
    : path_(std::move(path)), access_(access) {
  namespace fs = std::filesystem;
  if (access == Access::ReadOnly) {
    std::error_code ec;
    if (!fs::exists(path_, ec)) fail("store: " + path_ + ": no such run store");
    open(SQLITE_OPEN_READONLY, path_);
  } else {
    open(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, path_);
    // SQLite opens a file it may not write read-only without saying so; a writer must know.
    if (sqlite3_db_readonly(db_, "main") == 1)
      fail("store: " + path_ +
           " is read-only (no write permission); open it read-only to query it, or choose "
           "another store file");
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);

  // SQLite reads the file lazily: touch the schema now, so a file that is not a database
  // (or is damaged) fails here with a clear message rather than in the first query.
  int rc = sqlite3_exec(db_, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr);
  if (access == Access::ReadOnly && rc == SQLITE_READONLY_ROLLBACK) {
    // A writer died mid-transaction and left a hot journal, which a read-only connection may
    // not roll back (and reading around it would show half a transaction). Any connection
    // that may write rolls it back on its first read: one does, then this one reads.
    close();
    open(SQLITE_OPEN_READWRITE, path_);
    rc = sqlite3_exec(db_, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr);
    close();
    if (rc != SQLITE_OK)
      fail("store: " + path_ + " was left mid-write by a process that died, and this user may not repair it; "
           "open it once for writing (any kiln command that records runs)");
    open(SQLITE_OPEN_READONLY, path_);
    rc = sqlite3_exec(db_, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr);
  }
  const int primary = rc & 0xff;
  if (access == Access::ReadOnly && (primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN)) {
    // A WAL-mode file needs its -shm index, which this user may not create when the folder
    // is not theirs to write (unindexed_read.h).
    const std::string detail = sqlite3_errmsg(db_);
    close();
    rc = open_unindexed(detail);
  }
  if (rc != SQLITE_OK) {
    const std::string message = "store: " + describe(rc, path_, sqlite3_errmsg(db_));
    close();
    throw DatabaseError(message, rc);
  }

  // Foreign keys are off by default in SQLite, per connection: removing a run must cascade.
  exec("PRAGMA foreign_keys = ON");
  exec("PRAGMA mmap_size = 1073741824");
  // NORMAL in WAL mode: a commit survives a crash of the process (kill -9) and the file is
  // never corrupted; only a power loss or OS crash may roll back the last commits. FULL
  // would add an fsync to every log interval. (A per-connection setting: it writes nothing.)
  if (access == Access::ReadWrite) exec("PRAGMA synchronous = NORMAL");
}

int Database::open_unindexed(const std::string& sqlite_detail) {
  const UnindexedRead how = unindexed_read(path_, sqlite_detail);
  // Marked before opening: a writer that starts in between is caught by the first read.
  unindexed_ = mark_store_files(path_);
  if (how == UnindexedRead::MainFileOnly) {
    open(SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, file_uri(path_) + "?immutable=1");
  } else {
    // EXCLUSIVE locking mode, set before the first read, indexes the -wal in this
    // connection's memory and never touches a -shm (sqlite.org/wal.html, "Use of WAL Without
    // Shared-Memory"). That mode's lock needs a descriptor open for writing, which a reader
    // has not: the "unix-none" VFS takes no locks, and none are needed while no connection
    // uses the store (require_unchanged watches for one starting).
    open(SQLITE_OPEN_READONLY, path_, "unix-none");
    sqlite3_exec(db_, "PRAGMA locking_mode = EXCLUSIVE", nullptr, nullptr, nullptr);
  }
  return sqlite3_exec(db_, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr);
}

void Database::require_unchanged() const {
  if (unindexed_ && mark_store_files(path_) != *unindexed_)
    throw DatabaseError(store_changed_message(path_), SQLITE_BUSY);
}

void Database::use_wal() {
  // WAL: readers never block the writer and the writer never blocks readers, and a commit
  // is one append to the -wal file. The mode is stored in the file, so set it only once.
  if (query_text("PRAGMA journal_mode") != "wal" &&
      query_text("PRAGMA journal_mode = WAL") != "wal")
    fail("store: " + path_ + ": cannot switch to WAL mode (is it on a network filesystem?)");
}

Database::~Database() { close(); }

void Database::open(int flags, const std::string& filename, const char* vfs) {
  // NOMUTEX: one thread uses a connection at a time, so SQLite's own locking is waste.
  const int rc = sqlite3_open_v2(filename.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    const std::string message =
        "store: " + describe(rc, path_, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    close();
    throw DatabaseError(message, rc);
  }
  sqlite3_extended_result_codes(db_, 1);
}

void Database::close() {
  cache_.clear();  // statements must be finalized before their connection closes
  if (db_) sqlite3_close(db_);
  db_ = nullptr;
}

void Database::exec(const std::string& sql) {
  require_unchanged();
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  sqlite3_free(error);  // the same text as sqlite3_errmsg, which raise() reads
  if (rc != SQLITE_OK) raise(rc);
}

int64_t Database::query_int(const std::string& sql, int64_t fallback) {
  Statement st(*this, sql);
  return st.step() && !st.is_null(0) ? st.int64(0) : fallback;
}

std::string Database::query_text(const std::string& sql) {
  Statement st(*this, sql);
  return st.step() ? st.text(0) : std::string();
}

Statement& Database::cached(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    if (cache_.size() >= kMaxCachedStatements)
      cache_.erase(std::min_element(cache_.begin(), cache_.end(), [](const auto& a, const auto& b) {
        return a.second.last_use < b.second.last_use;
      }));
    it = cache_.emplace(sql, CachedStatement{std::make_unique<Statement>(*this, sql), 0}).first;
  }
  it->second.last_use = ++uses_;
  it->second.statement->reset();
  return *it->second.statement;
}

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

int64_t Database::changes() const { return sqlite3_changes64(db_); }

void Database::raise(int rc) const {
  throw DatabaseError(
      "store: " + describe(rc, path_, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc)), rc);
}

// ---- Transaction ----

Transaction::Transaction(Database& db, Kind kind) : db_(db) {
  db_.exec(kind == Kind::Immediate ? "BEGIN IMMEDIATE" : "BEGIN");
}

Transaction::~Transaction() {
  if (!open_) return;
  // A failed statement may already have rolled the transaction back (SQLITE_FULL does);
  // ROLLBACK then reports "no transaction is active", which is fine to ignore.
  sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

// ---- ReadSnapshot ----

ReadSnapshot::ReadSnapshot(Database& db) : db_(db) {
  if (sqlite3_get_autocommit(db_.handle()) == 0) return;
  db_.exec("BEGIN");
  owned_ = true;
}

ReadSnapshot::~ReadSnapshot() {
  if (!owned_) return;
  // A read-only transaction has nothing to lose, but it must end: a connection left inside
  // it would read this snapshot forever. ROLLBACK ends it even when COMMIT cannot.
  if (sqlite3_exec(db_.handle(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

}  // namespace kiln::store
