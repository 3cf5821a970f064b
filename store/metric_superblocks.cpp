#include "store/metric_superblocks.h"

#include <optional>
#include <tuple>
#include <vector>

namespace kiln::store {
namespace {

// An upsert: a superblock recomputed or merged into is written in place, without reading
// first whether it is stored.
void store_superblock(Database& db, int64_t run_id, int rank, int64_t superblock, const BlockAggregates& keys) {
  db.cached(
        "INSERT INTO metric_superblocks (run_id, rank, superblock, aggregates) VALUES (?1, ?2, ?3, ?4) "
        "ON CONFLICT (run_id, rank, superblock) DO UPDATE SET aggregates = excluded.aggregates")
      .bind_all(run_id, rank, superblock, encode_block(keys))
      .run();
}

// The merge of rank's stored blocks in the superblock; none when it has none.
std::optional<BlockAggregates> blocks_of(Database& db, int64_t run_id, int rank, int64_t superblock) {
  return merged_aggregates(db, Level::Block, run_id, rank, first_block_of(superblock), last_block_of(superblock));
}

}  // namespace

void SuperblockUpdate::appended(int rank, int64_t block, const BlockAggregates& rows) {
  Pending& p = pending_[{rank, superblock_of(block)}];
  if (p.added.empty()) p.added.resize(rows.size());
  merge_into(p.added, rows);
}

void SuperblockUpdate::recomputed(int rank, int64_t block) { pending_[{rank, superblock_of(block)}].recompute = true; }

void SuperblockUpdate::write(Database& db, int64_t run_id) {
  for (auto& [where, p] : pending_) {
    const auto [rank, superblock] = where;
    if (p.recompute) {
      if (const auto merged = blocks_of(db, run_id, rank, superblock))
        store_superblock(db, run_id, rank, superblock, *merged);
      continue;
    }
    if (auto stored = read_aggregates(db, Level::Superblock, run_id, rank, superblock)) {
      merge_into(*stored, p.added);
      p.added = std::move(*stored);
    }
    store_superblock(db, run_id, rank, superblock, p.added);
  }
  pending_.clear();
}

void trim_superblocks_after(Database& db, int64_t run_id, int64_t last_step) {
  const int64_t superblock = superblock_of(block_of(last_step));
  db.cached("DELETE FROM metric_superblocks WHERE run_id = ? AND superblock >= ?").bind_all(run_id, superblock).run();
  for (const int rank : block_ranks(db, run_id))
    if (const auto merged = blocks_of(db, run_id, rank, superblock))
      store_superblock(db, run_id, rank, superblock, *merged);
}

void build_superblocks(Database& db) {
  // The unique index's order: a superblock's blocks are consecutive.
  Statement walk(db, "SELECT run_id, rank, block, aggregates FROM metric_blocks ORDER BY run_id, rank, block");
  Statement insert(db, "INSERT INTO metric_superblocks (run_id, rank, superblock, aggregates) VALUES (?, ?, ?, ?)");
  std::optional<std::tuple<int64_t, int64_t, int64_t>> at;  // (run, rank, superblock)
  BlockAggregates merged;
  const auto close = [&] {
    if (!at) return;
    const auto [run, rank, superblock] = *at;
    insert.bind_all(run, rank, superblock, encode_keys(merged));
    insert.run();
    insert.reset();
  };
  while (walk.step()) {
    const std::tuple<int64_t, int64_t, int64_t> here{walk.int64(0), walk.int64(1), superblock_of(walk.int64(2))};
    const BlockAggregates block = decode_keys(walk.blob(3));
    if (here != at) {
      close();
      at = here;
      merged.assign(block.size(), KeyAggregate{});
    }
    merge_into(merged, block);
  }
  close();
}

}  // namespace kiln::store
