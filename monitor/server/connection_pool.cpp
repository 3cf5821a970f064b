#include "monitor/server/connection_pool.h"

#include <utility>

#include "base/check.h"
#include "monitor/server/api_reply.h"
#include "store/schema.h"

namespace kiln::monitor {

ConnectionPool::ConnectionPool(std::string path, store::Access access, size_t max_idle)
    : path_(std::move(path)), access_(access), max_idle_(max_idle) {}

ConnectionPool::Lease::Lease(ConnectionPool& pool, std::unique_ptr<store::Database> db)
    : pool_(pool), db_(std::move(db)) {}

ConnectionPool::Lease::~Lease() {
  if (!db_) return;
  std::unique_ptr<store::Database> surplus;
  {
    std::lock_guard lock(pool_.mutex_);
    if (pool_.idle_.size() < pool_.max_idle_) pool_.idle_.push_back(std::move(db_));
    else surplus = std::move(db_);
  }
  // A surplus connection closes here, outside the lock: closing may take SQLite a while.
}

ConnectionPool::Lease ConnectionPool::borrow() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      auto db = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(db));
    }
  }
  try {
    return Lease(*this, store::open_store(path_, access_));
  } catch (const Error& e) {
    throw ApiError(http::status::service_unavailable, e.what());
  }
}

}  // namespace kiln::monitor
