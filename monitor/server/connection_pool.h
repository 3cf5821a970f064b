// Store connections for the server's threads. A SQLite connection serves one thread at a
// time, and opening one per request would re-read the schema each time, so requests borrow
// an open one and hand it back. A pool keeps at most `max_idle` open between requests and
// closes the rest as they come back: a server over many stores holds a pool for each.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "monitor/server/server_limits.h"
#include "store/database.h"

namespace kiln::monitor {

class ConnectionPool {
 public:
  ConnectionPool(std::string path, store::Access access, size_t max_idle = limits::kMaxIdleStoreConnections);

  class Lease {
   public:
    Lease(ConnectionPool& pool, std::unique_ptr<store::Database> db);
    // Moved, a lease hands its connection on; the one it leaves returns nothing.
    Lease(Lease&& other) noexcept : pool_(other.pool_), db_(std::move(other.db_)) {}
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    store::Database& operator*() const { return *db_; }

   private:
    ConnectionPool& pool_;
    std::unique_ptr<store::Database> db_;
  };

  // An idle connection, or a new one; a store that cannot be opened is an ApiError (503).
  Lease borrow();

 private:
  std::string path_;
  store::Access access_;
  size_t max_idle_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<store::Database>> idle_;
};

}  // namespace kiln::monitor
