// The rollup's second level (table metric_superblocks): per run, rank and superblock of
// kBlocksPerSuperblock blocks (4,096 steps), every metric key's aggregate over those blocks,
// in metric_blocks' blob (metric_blocks.h's encoder). A chart whose buckets span 4,096 steps
// or more, or whose blocks would pass its row bound, reads these: a rank of a 1,000,000-step
// run is 245 superblocks instead of 15,625 blocks (metric_queries.h's SeriesQuery).
//
// A table of its own rather than a level column in metric_blocks: the blocks' unique key and
// every statement on them stay as they are (a level column would rebuild that key, copying
// every block, and add `level = ?` to each statement), and a superblock's row has the same
// shape, so the same code reads both (metric_blocks.h's Level).
//
// A superblock is always the merge of its stored blocks: the writer updates it in the
// transaction that updates the blocks (BlockUpdate::write calls SuperblockUpdate), a rewind
// trims it with them (trim_blocks_after), deleting a run deletes it (ON DELETE CASCADE).
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "store/database.h"
#include "store/metric_blocks.h"

namespace kiln::store {

// The schema version that made the table: a metric key added later appends its empty
// aggregate to the superblocks too (metric_fields.h's metric_columns_added_in).
inline constexpr int kSuperblocksSince = 20;

// What one transaction did to the blocks, per superblock. Appending to a block adds rows that
// replace none it counted, so the superblock merges them in too: one superblock row read and
// written per rank a commit. A recomputed block may have lost a row's value (a resumed run
// logged its step again), which a min or max cannot give back: its superblock is recomputed
// from its blocks, at most 64.
class SuperblockUpdate {
 public:
  // Rows merged into a block or making a new one: their aggregates, not the block's.
  void appended(int rank, int64_t block, const BlockAggregates& rows);
  // A block recomputed from its rows.
  void recomputed(int rank, int64_t block);
  // After the blocks are written; starts over empty.
  void write(Database& db, int64_t run_id);

 private:
  struct Pending {
    BlockAggregates added;
    bool recompute = false;
  };
  std::map<std::pair<int, int64_t>, Pending> pending_;  // by (rank, superblock)
};

// After trim_blocks_after trimmed the blocks past `last_step`: the superblocks past the one
// holding it go, and that one is recomputed from the blocks it has left.
void trim_superblocks_after(Database& db, int64_t run_id, int64_t last_step);

// Migration 20: every stored block's superblock, from one walk of metric_blocks in key order.
// The blobs hold the keys of the version the store is at, which may be fewer than this
// binary's (a later version appends its keys after this step).
void build_superblocks(Database& db);

}  // namespace kiln::store
