// The run stores one server shows (docs/dashboard.md#several-stores): the first, served as
// `kiln serve` always served its store, its runs read, steered and edited; and any others
// beside it (one per host or per user, say), read-only: the server never opens them for
// writing. Each has a label (store_labels.h) and a bounded pool of connections of its own.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/server/connection_pool.h"

namespace kiln::monitor {

struct ServedStore {
  ServedStore(size_t index, std::string label, std::string path, bool writable);

  size_t index;  // its place in the server's order, the first 0
  std::string label;
  std::string path;
  bool writable;  // the first store only
  ConnectionPool reads;
  std::unique_ptr<ConnectionPool> writes;  // null for a read-only store
};

class ServedStores {
 public:
  // `first` served writable, `read_only` beside it in order. More than limits::kMaxStores
  // stores, a file given twice, or a read-only one that is missing, not a kiln store or newer
  // than this binary is a kiln::Error in one line; nothing is written to any of them.
  ServedStores(const std::string& first, const std::vector<std::string>& read_only);

  size_t size() const { return stores_.size(); }
  ServedStore& operator[](size_t index) const { return *stores_[index]; }
  ServedStore& first() const { return *stores_.front(); }
  // The store of this label, or null.
  ServedStore* find(std::string_view label) const;
  // "a, b, c": the labels, for messages.
  std::string labels() const;

 private:
  std::vector<std::unique_ptr<ServedStore>> stores_;
};

}  // namespace kiln::monitor
