#include "monitor/server/served_stores.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "base/check.h"
#include "monitor/server/server_limits.h"
#include "monitor/server/store_labels.h"
#include "store/schema.h"

namespace kiln::monitor {
namespace {

// The same file under two paths (a link, `./a.db` and `a.db`) would show every run twice,
// and a read-only view of the writable store beside it.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  if (a == b) return true;
  std::error_code ec;
  if (fs::equivalent(a, b, ec) && !ec) return true;
  std::error_code ec_a, ec_b;
  const fs::path canonical_a = fs::weakly_canonical(a, ec_a), canonical_b = fs::weakly_canonical(b, ec_b);
  return !ec_a && !ec_b && canonical_a == canonical_b;
}

}  // namespace

ServedStore::ServedStore(size_t index, std::string label, std::string path, bool writable)
    : index(index),
      label(std::move(label)),
      path(std::move(path)),
      writable(writable),
      reads(this->path, store::Access::ReadOnly),
      writes(writable ? std::make_unique<ConnectionPool>(this->path, store::Access::ReadWrite) : nullptr) {}

ServedStores::ServedStores(const std::string& first, const std::vector<std::string>& read_only) {
  std::vector<std::string> paths{first};
  paths.insert(paths.end(), read_only.begin(), read_only.end());
  if (paths.size() > limits::kMaxStores)
    fail("store: " + std::to_string(paths.size()) + " stores given; a server shows at most " +
         std::to_string(limits::kMaxStores));
  for (size_t i = 0; i < paths.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (same_file(paths[j], paths[i]))
        fail("store: " + paths[i] + " is given twice" + (paths[i] == paths[j] ? "" : " (as " + paths[j] + ")"));
  // The stores beside the first must be there now, as kiln stores this binary reads: a
  // server's first store may be made by the run it serves beside (kiln train --serve).
  for (size_t i = 1; i < paths.size(); ++i) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(paths[i], ec)) fail("store: no store at " + paths[i]);
    store::open_store(paths[i], store::Access::ReadOnly);
  }
  const std::vector<std::string> labels = store_labels(paths);
  for (size_t i = 0; i < paths.size(); ++i)
    stores_.push_back(std::make_unique<ServedStore>(i, labels[i], paths[i], i == 0));
}

ServedStore* ServedStores::find(std::string_view label) const {
  for (const auto& store : stores_)
    if (store->label == label) return store.get();
  return nullptr;
}

std::string ServedStores::labels() const {
  std::string text;
  for (const auto& store : stores_) text += (text.empty() ? "" : ", ") + store->label;
  return text;
}

}  // namespace kiln::monitor
