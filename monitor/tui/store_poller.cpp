#include "monitor/tui/store_poller.h"

namespace kiln::tui {

bool StorePoller::changed() {
  const int64_t version = db_.query_int("PRAGMA data_version");
  const bool moved = version != version_;
  version_ = version;
  return moved;
}

}  // namespace kiln::tui
