#include "trainer/data/bpe_piece_cache.h"

namespace kiln {

bool BpePieceCache::find(std::string_view piece, std::vector<int32_t>& ids) const {
  const Shard& shard = shards_[shard_of(piece)];
  const std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.ids.find(piece);
  if (it == shard.ids.end()) return false;
  ids.insert(ids.end(), it->second.begin(), it->second.end());
  return true;
}

void BpePieceCache::insert(std::string_view piece, std::span<const int32_t> ids) {
  Shard& shard = shards_[shard_of(piece)];
  const std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.ids.size() >= kShardEntries) shard.ids.clear();
  shard.ids.try_emplace(std::string(piece), ids.begin(), ids.end());
}

}  // namespace kiln
