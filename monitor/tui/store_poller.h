// Tells the UI when the store has changed, so a screen re-reads only after another process
// (a training run, `kiln runs`, the dashboard) committed something. SQLite's data_version
// moves on every commit by another connection and costs no table read.
#pragma once

#include <cstdint>

#include "store/database.h"

namespace kiln::tui {

class StorePoller {
 public:
  explicit StorePoller(store::Database& db) : db_(db) {}
  // True on the first call and whenever another connection has committed since the last.
  bool changed();

 private:
  store::Database& db_;
  int64_t version_ = -1;
};

}  // namespace kiln::tui
