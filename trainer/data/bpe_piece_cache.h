// The ids of pieces already merged, shared by every thread encoding with one tokenizer.
// Text repeats its words, so most pieces are found here and BPE runs about once per
// distinct piece: this is what makes encoding fast. Sharded by hash, each shard under
// its own lock; a shard that fills up is emptied, so memory stays bounded on any input.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

class BpePieceCache {
 public:
  // Longer pieces are rare (long numbers, whitespace runs) and not worth their memory.
  static constexpr size_t kMaxPieceBytes = 64;

  // Appends the ids of piece to ids and returns true when it is cached.
  bool find(std::string_view piece, std::vector<int32_t>& ids) const;
  void insert(std::string_view piece, std::span<const int32_t> ids);

 private:
  static constexpr size_t kShards = 64;
  static constexpr size_t kShardEntries = 4096;  // 256 Ki pieces in all, a few tens of MiB

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> ids;
  };

  static size_t shard_of(std::string_view piece) {
    // The map uses the low bits of the same hash; the shard takes the high ones.
    return (Hash{}(piece) >> 48) % kShards;
  }

  std::array<Shard, kShards> shards_;
};

}  // namespace kiln
