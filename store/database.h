// A connection to one SQLite file, with prepared statements and transactions as RAII.
//
// A Database is used by one thread at a time (it is opened with SQLITE_OPEN_NOMUTEX: the
// writer thread and each reader own their own connection, which is what WAL mode is built
// for). Every failure is a kiln::Error with a one-line "store: ..." message naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "store/unindexed_read.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::store {

enum class Access { ReadWrite, ReadOnly };

inline constexpr int kDefaultBusyTimeoutMs = 5000;

class Database;

// One prepared statement. Parameters are 1-based, columns 0-based, as in SQLite.
class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, double value);  // NaN binds as NULL
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, std::span<const std::byte> value);  // a BLOB
  Statement& bind(int index, std::nullopt_t);
  template <typename T>
  Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind(index, std::nullopt);
  }
  // Binds the arguments to parameters 1, 2, ... in order.
  template <typename... Args>
  Statement& bind_all(const Args&... args) {
    int index = 0;
    (bind(++index, args), ...);
    return *this;
  }

  // Advances: true when a row is ready to read, false when the statement is done.
  bool step();
  // Steps to the end (for statements that return no rows).
  void run();
  // Back to the start with no bindings, ready to bind and step again.
  void reset();

  bool is_null(int column) const;
  int64_t int64(int column) const;
  double real(int column) const;  // NULL reads as NaN
  std::string text(int column) const;
  std::optional<int64_t> opt_int64(int column) const;
  std::optional<double> opt_real(int column) const;
  // A BLOB's bytes, valid until the next step() or reset(): read without a copy.
  std::span<const std::byte> blob(int column) const;

 private:
  Database& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  // ReadWrite creates the file when it is missing and refuses a file it cannot write;
  // ReadOnly never writes (and reads a store in a folder it cannot write, too: whole, or
  // not at all, unindexed_read.h).
  // The connection waits up to busy_timeout_ms for another writer's lock.
  Database(std::string path, Access access, int busy_timeout_ms = kDefaultBusyTimeoutMs);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  Access access() const { return access_; }
  sqlite3* handle() const { return db_; }

  // Puts the file in WAL journal mode (stored in the file; a no-op when it is already). The
  // store does this only once it knows the file is its own (open_store), so opening
  // another program's SQLite file for writing changes nothing in it.
  void use_wal();

  // Runs SQL text of one or more statements that return no rows.
  void exec(const std::string& sql);
  // The first column of the first row of a query (NULL or no row: fallback).
  int64_t query_int(const std::string& sql, int64_t fallback = 0);
  std::string query_text(const std::string& sql);

  // A statement prepared once per connection and kept: the hot paths (inserts, series
  // queries) skip SQLite's parser after their first call. Returned reset and unbound.
  // At most kMaxCachedStatements are kept (kiln's own SQL texts are far fewer, so this only
  // bites SQL built from input): past it, the least recently used one is finalized, so a
  // reference stays valid until that many other statements have been prepared.
  Statement& cached(const std::string& sql);
  size_t cached_count() const { return cache_.size(); }
  static constexpr size_t kMaxCachedStatements = 256;

  int64_t last_insert_rowid() const;
  int64_t changes() const;

  // Throws the kiln::Error for SQLite result code rc on this connection.
  [[noreturn]] void raise(int rc) const;

  // A reader that could not use the store's shared index and read it without
  // (unindexed_read.h) sees the store as it was when opened: it throws (DatabaseError, one
  // line) once a writer has changed the store since, rather than show what it holds as the
  // whole store. Any other connection returns. Every statement's first step and exec() call it.
  void require_unchanged() const;

 private:
  void open(int flags, const std::string& filename, const char* vfs = nullptr);
  // Opens the store as unindexed_read says and reads its schema; returns SQLite's code.
  int open_unindexed(const std::string& sqlite_detail);
  void close();

  std::string path_;
  Access access_;
  sqlite3* db_ = nullptr;
  std::optional<StoreFilesMark> unindexed_;  // the files as an unindexed reader found them
  struct CachedStatement {
    std::unique_ptr<Statement> statement;
    uint64_t last_use = 0;
  };
  std::unordered_map<std::string, CachedStatement> cache_;
  uint64_t uses_ = 0;
};

// BEGIN ... COMMIT, rolled back if destroyed before commit(). Writers begin IMMEDIATE: they
// take the write lock up front, so a busy database makes BEGIN wait (busy timeout) instead
// of failing half-way through the transaction with a lock upgrade that cannot be retried.
class Transaction {
 public:
  enum class Kind { Deferred, Immediate };
  explicit Transaction(Database& db, Kind kind = Kind::Immediate);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool open_ = true;
};

// A read that takes several statements and must see one state of the file (a series reads
// its ranges, rollup blocks and rows in turn): a deferred transaction holds one WAL snapshot
// until it ends, so a commit landing in between cannot show half of itself. Inside a caller's
// transaction it adds nothing: that one already holds the snapshot.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Database& db);
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  Database& db_;
  bool owned_ = false;
};

}  // namespace kiln::store
