// The metric rollup (table metric_blocks): per run, rank and block of kStepsPerBlock steps,
// every metric key's min, max and last value. A downsampled chart of a long run reads these
// instead of the rows: one metric of a 1,000,000-step run is 15,625 blocks, not 1,000,000
// rows of the wide metrics table.
//
// The writer updates the blocks in the transaction that inserts their rows (BlockUpdate), so
// no reader ever sees the two disagree; metric_series reads them. This file owns the blob
// encoding, the merging, every statement on the table, and the reads of either level's
// rows (Level), which have one shape; metric_superblocks.h writes the second level.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// A block's row (~1,000 bytes) adds ~16 bytes to each row of a run that logs every step
// (about 8% of a row), while a 1000-point chart of a run longer than 64,000 steps reads
// 1/64 as many rows. A run that logs once in 64 steps or less often has a block per row.
inline constexpr int64_t kStepsPerBlock = 64;

// The second level (metric_superblocks.h): 64 blocks, 4,096 steps. A chart of 1,024 ranks over
// 100,000 steps read 1,563 blocks a rank; it reads 25 superblocks.
inline constexpr int64_t kBlocksPerSuperblock = 64;

// floor(n / d): steps below 0 fall in negative blocks, never in block 0.
constexpr int64_t floor_div(int64_t n, int64_t d) { return n / d - (n % d < 0 ? 1 : 0); }
constexpr int64_t block_of(int64_t step) { return floor_div(step, kStepsPerBlock); }
constexpr int64_t first_step_of(int64_t block) { return block * kStepsPerBlock; }
constexpr int64_t last_step_of(int64_t block) {
  return block * kStepsPerBlock + (kStepsPerBlock - 1);
}
constexpr int64_t superblock_of(int64_t block) { return floor_div(block, kBlocksPerSuperblock); }
constexpr int64_t first_block_of(int64_t superblock) { return superblock * kBlocksPerSuperblock; }
constexpr int64_t last_block_of(int64_t superblock) {
  return superblock * kBlocksPerSuperblock + (kBlocksPerSuperblock - 1);
}

// One key over the rows that hold a value for it.
struct KeyAggregate {
  double min = kNoValue;  // NaN: no row had a value (the key is absent)
  double max = kNoValue;
  double last = kNoValue;  // the value at the highest step, with that step and its time
  int64_t last_step = 0;
  double last_time = 0;

  bool present() const { return !std::isnan(min); }
  void add(int64_t step, double time, double value);
  // Folds in the aggregate of other rows; `last` goes to the higher step.
  void merge(const KeyAggregate& other);
};

// A block: one aggregate per key of metric_keys(), in that order.
using BlockAggregates = std::vector<KeyAggregate>;

// Merges `other`'s aggregates into `into`'s, key by key (the same keys).
void merge_into(BlockAggregates& into, const BlockAggregates& other);

// The aggregates blob: per key, in metric_keys() order, 40 bytes little-endian: min, max and
// last (f64), last_step (i64), last_time (f64); an absent key has a NaN min. A key added to
// metric_keys() changes the size, so it comes with a migration that rebuilds the blocks;
// decoding refuses a blob of another size rather than misread it.
inline constexpr size_t kKeyAggregateBytes = 40;
std::vector<std::byte> encode_block(const BlockAggregates& block);
BlockAggregates decode_block(std::span<const std::byte> blob);
KeyAggregate decode_key(std::span<const std::byte> blob, size_t key);
// The same encoding of any number of keys, unchecked against metric_keys(): for a migration,
// whose blobs hold the keys of the version it migrates from.
std::vector<std::byte> encode_keys(const BlockAggregates& keys);
BlockAggregates decode_keys(std::span<const std::byte> blob);

// The position of a key in metric_keys() (and in the blob); an unknown key is an error.
size_t key_index(std::string_view key);

// Every key's aggregate per rank over the rows of the metrics table in [first_step,
// last_step]. One walk serves every rank: the rows are keyed by step first.
std::map<int, BlockAggregates> aggregate_rows(Database& db, int64_t run_id, int64_t first_step,
                                              int64_t last_step);

// The blocks of the rows one transaction inserts, and their superblocks (metric_superblocks.h):
// add() the rows after inserting them, then write() before the commit. A block whose new rows all come after its last counted step
// merges their aggregates in (appending: O(1) per block per commit, no rows read). A row at
// or before that step may have replaced a counted row (a resumed run logs its steps again,
// and insert_metric replaces), and a min or max cannot give a value back, so such a block,
// or one whose new rows repeat a step among themselves, is recomputed from its rows.
class BlockUpdate {
 public:
  void add(std::span<const MetricRow> rows);
  // Writes every touched block and starts over empty.
  void write(Database& db, int64_t run_id);

 private:
  struct Pending {
    BlockAggregates keys;
    int64_t first_step = 0;  // the lowest step added
    int64_t last_step = 0;   // the step of the row added last
    bool ordered = true;     // every step added above the one before it: no step twice
  };
  std::map<std::pair<int, int64_t>, Pending> pending_;  // by (rank, block)
};

// After the caller deleted the run's metric rows past `last_step` (a rewind, rewind_rows.h):
// the blocks past it go, and the block holding it is recomputed from the rows it has left
// (or goes, for a rank with none left there), so no min or max remembers a deleted row; the
// superblocks follow (trim_superblocks_after).
void trim_blocks_after(Database& db, int64_t run_id, int64_t last_step);

// The ranks with blocks in the run, ascending.
std::vector<int> block_ranks(Database& db, int64_t run_id);

// The rollup's levels, each a table of the same rows keyed (run_id, rank, unit): a unit is a
// block of metric_blocks or a superblock of metric_superblocks (metric_superblocks.h).
enum class Level { Block, Superblock };

// Every key's aggregate in rank's unit, if stored.
std::optional<BlockAggregates> read_aggregates(Database& db, Level level, int64_t run_id, int rank, int64_t unit);
// Every key's aggregate over rank's stored units first..last, merged; none when none is stored.
std::optional<BlockAggregates> merged_aggregates(Database& db, Level level, int64_t run_id, int rank,
                                                 int64_t first, int64_t last);

struct KeyBlock {
  int64_t block = 0;  // the unit: a block, or a superblock at Level::Superblock
  KeyAggregate aggregate;
};

// One key's aggregate in each of rank's units first..last, by unit; units without a value of
// the key are left out.
std::vector<KeyBlock> read_key_blocks(Database& db, int64_t run_id, int rank, size_t key,
                                      int64_t first_block, int64_t last_block, Level level = Level::Block);

// The lowest of rank's blocks first_block..last_block with a value of the key: a walk that
// stops there, usually at the first.
std::optional<int64_t> first_key_block(Database& db, int64_t run_id, int rank, size_t key,
                                       int64_t first_block, int64_t last_block);

// One key's aggregate per rank over the rows in [first_step, last_step] (the part of a block
// a step range cuts, at most kStepsPerBlock steps), of the wanted ranks (ascending; empty:
// every rank); ranks without a value there are left out.
std::map<int, KeyAggregate> aggregate_key_rows(Database& db, int64_t run_id, size_t key,
                                               std::span<const int> ranks, int64_t first_step,
                                               int64_t last_step);

// Ranks as a JSON array, for a statement to bind and read with json_each; none: NULL.
std::optional<std::string> rank_array(std::span<const int> ranks);

}  // namespace kiln::store
