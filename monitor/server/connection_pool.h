// Store connections for the server's threads. A SQLite connection serves one thread at a
// time, and opening one per request would re-read the schema each time, so requests borrow
// an open one and hand it back.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/database.h"

namespace kiln::monitor {

class ConnectionPool {
 public:
  ConnectionPool(std::string path, store::Access access);

  class Lease {
   public:
    Lease(ConnectionPool& pool, std::unique_ptr<store::Database> db);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
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
  std::mutex mutex_;
  std::vector<std::unique_ptr<store::Database>> idle_;
};

}  // namespace kiln::monitor
