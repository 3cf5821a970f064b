#include "store/metric_blocks.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <string>

#include "store/error.h"
#include "store/metric_fields.h"
#include "store/metric_queries.h"
#include "store/metric_superblocks.h"

namespace kiln::store {
namespace {

size_t block_bytes() { return metric_keys().size() * kKeyAggregateBytes; }

// Each level's table and unit column: the statements on them differ only there.
struct LevelSql {
  std::string read_one, read_range;
};
const LevelSql& sql_of(Level level) {
  static const auto make = [](const std::string& table, const std::string& unit) {
    return LevelSql{"SELECT aggregates FROM " + table + " WHERE run_id = ? AND rank = ? AND " + unit + " = ?",
                    "SELECT " + unit + ", aggregates FROM " + table + " WHERE run_id = ? AND rank = ? AND " + unit +
                        " BETWEEN ? AND ? ORDER BY " + unit};
  };
  static const LevelSql blocks = make("metric_blocks", "block");
  static const LevelSql superblocks = make("metric_superblocks", "superblock");
  return level == Level::Block ? blocks : superblocks;
}

void check_size(std::span<const std::byte> blob) {
  if (blob.size() != block_bytes())
    fail("store: a metric_blocks row holds " + std::to_string(blob.size()) + " bytes, not " +
         std::to_string(block_bytes()) + " (" + std::to_string(metric_keys().size()) +
         " keys); the store needs a migration that rebuilds its blocks");
}

void put(std::byte* out, uint64_t bits) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(bits >> (8 * i));
}
void put(std::byte* out, double value) { put(out, std::bit_cast<uint64_t>(value)); }

uint64_t get_bits(const std::byte* in) {
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(in[i]) << (8 * i);
  return bits;
}
double get_real(const std::byte* in) { return std::bit_cast<double>(get_bits(in)); }

KeyAggregate key_at(std::span<const std::byte> blob, size_t key) {
  const std::byte* in = blob.data() + key * kKeyAggregateBytes;
  return KeyAggregate{get_real(in), get_real(in + 8), get_real(in + 16),
                      static_cast<int64_t>(get_bits(in + 24)), get_real(in + 32)};
}

// The highest step among the rows a block counts: any row there may be replaced. (Time is
// never NULL, so this is simply the block's highest row.)
int64_t last_counted_step(const BlockAggregates& block) {
  int64_t last = std::numeric_limits<int64_t>::min();
  for (const auto& k : block)
    if (k.present()) last = std::max(last, k.last_step);
  return last;
}

// An UPDATE where the block is stored (the caller has just read it): INSERT OR REPLACE
// would delete the row and insert it again, about 10% slower on a commit of 64 ranks.
void store_block(Database& db, int64_t run_id, int rank, int64_t block,
                 const BlockAggregates& keys, bool exists) {
  Statement& st =
      exists ? db.cached("UPDATE metric_blocks SET aggregates = ?4 "
                         "WHERE run_id = ?1 AND rank = ?2 AND block = ?3")
             : db.cached("INSERT INTO metric_blocks (run_id, rank, block, aggregates) "
                         "VALUES (?1, ?2, ?3, ?4)");
  st.bind_all(run_id, rank, block, encode_block(keys));
  st.run();
}

std::string key_columns() {
  std::string columns;
  for (const auto key : metric_keys()) columns += ", " + std::string(key);
  return columns;
}

}  // namespace

void KeyAggregate::add(int64_t step, double time, double value) {
  if (!present()) {
    min = max = value;
  } else {
    min = std::min(min, value);
    max = std::max(max, value);
    if (step < last_step) return;
  }
  last = value;
  last_step = step;
  last_time = time;
}

void KeyAggregate::merge(const KeyAggregate& other) {
  if (!other.present()) return;
  if (!present()) {
    *this = other;
    return;
  }
  min = std::min(min, other.min);
  max = std::max(max, other.max);
  if (other.last_step >= last_step) {
    last = other.last;
    last_step = other.last_step;
    last_time = other.last_time;
  }
}

void merge_into(BlockAggregates& into, const BlockAggregates& other) {
  for (size_t k = 0; k < into.size(); ++k) into[k].merge(other[k]);
}

std::vector<std::byte> encode_block(const BlockAggregates& block) {
  if (block.size() != metric_keys().size())
    fail("store: a metric block needs " + std::to_string(metric_keys().size()) +
         " aggregates, not " + std::to_string(block.size()));
  return encode_keys(block);
}

std::vector<std::byte> encode_keys(const BlockAggregates& keys) {
  std::vector<std::byte> blob(keys.size() * kKeyAggregateBytes);
  std::byte* out = blob.data();
  for (const auto& k : keys) {
    put(out, k.min);
    put(out + 8, k.max);
    put(out + 16, k.last);
    put(out + 24, static_cast<uint64_t>(k.last_step));
    put(out + 32, k.last_time);
    out += kKeyAggregateBytes;
  }
  return blob;
}

KeyAggregate decode_key(std::span<const std::byte> blob, size_t key) {
  check_size(blob);
  return key_at(blob, key);
}

BlockAggregates decode_block(std::span<const std::byte> blob) {
  check_size(blob);
  return decode_keys(blob);
}

BlockAggregates decode_keys(std::span<const std::byte> blob) {
  if (blob.size() % kKeyAggregateBytes != 0)
    fail("store: a metric block of " + std::to_string(blob.size()) + " bytes is not whole keys of " +
         std::to_string(kKeyAggregateBytes));
  BlockAggregates keys;
  for (size_t k = 0; k < blob.size() / kKeyAggregateBytes; ++k) keys.push_back(key_at(blob, k));
  return keys;
}

size_t key_index(std::string_view key) {
  const auto keys = metric_keys();
  const auto it = std::find(keys.begin(), keys.end(), key);
  if (it == keys.end()) fail("store: unknown metric '" + std::string(key) + "'");
  return static_cast<size_t>(it - keys.begin());
}

std::map<int, BlockAggregates> aggregate_rows(Database& db, int64_t run_id, int64_t first_step,
                                              int64_t last_step) {
  static const std::string sql = "SELECT rank, step, time" + key_columns() +
                                 " FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ?";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, first_step, last_step);
  std::map<int, BlockAggregates> ranks;
  const size_t keys = metric_keys().size();
  while (st.step()) {
    BlockAggregates& block = ranks[static_cast<int>(st.int64(0))];
    block.resize(keys);
    const int64_t step = st.int64(1);
    const double time = st.real(2);
    for (size_t k = 0; k < keys; ++k) {
      const double value = st.real(static_cast<int>(k) + 3);  // NULL reads as NaN
      if (!std::isnan(value)) block[k].add(step, time, value);
    }
  }
  return ranks;
}

void BlockUpdate::add(std::span<const MetricRow> rows) {
  const auto field = block_fields();
  for (const auto& row : rows) {
    auto [it, fresh] = pending_.try_emplace({row.rank, block_of(row.step)});
    Pending& p = it->second;
    if (fresh) {
      p.keys.resize(field.size());
      p.first_step = row.step;
    } else {
      p.ordered = p.ordered && row.step > p.last_step;
      p.first_step = std::min(p.first_step, row.step);
    }
    p.last_step = row.step;
    for (size_t k = 0; k < field.size(); ++k) {
      const double value = metric_value(row, *field[k]);
      if (!std::isnan(value)) p.keys[k].add(row.step, row.time, value);
    }
  }
}

void BlockUpdate::write(Database& db, int64_t run_id) {
  // Blocks to recompute, by block, with whether each rank's is stored: one walk over a
  // block's rows serves all its ranks.
  std::map<int64_t, std::vector<std::pair<int, bool>>> recompute;
  SuperblockUpdate superblocks;
  for (auto& [where, p] : pending_) {
    const auto [rank, block] = where;
    std::optional<BlockAggregates> stored_block = read_aggregates(db, Level::Block, run_id, rank, block);
    const bool exists = stored_block.has_value();
    if (!p.ordered || (exists && p.first_step <= last_counted_step(*stored_block))) {
      recompute[block].emplace_back(rank, exists);
      superblocks.recomputed(rank, block);
      continue;
    }
    superblocks.appended(rank, block, p.keys);
    if (exists) {
      merge_into(*stored_block, p.keys);
      p.keys = std::move(*stored_block);
    }
    store_block(db, run_id, rank, block, p.keys, exists);
  }
  for (const auto& [block, ranks] : recompute) {
    const auto fresh = aggregate_rows(db, run_id, first_step_of(block), last_step_of(block));
    for (const auto& [rank, exists] : ranks)
      store_block(db, run_id, rank, block, fresh.at(rank), exists);
  }
  superblocks.write(db, run_id);
  pending_.clear();
}

void trim_blocks_after(Database& db, int64_t run_id, int64_t last_step) {
  const int64_t block = block_of(last_step);
  Statement& past = db.cached("DELETE FROM metric_blocks WHERE run_id = ? AND block >= ?");
  past.bind_all(run_id, block);
  past.run();
  const auto fresh = aggregate_rows(db, run_id, first_step_of(block), last_step);
  for (const auto& [rank, keys] : fresh) store_block(db, run_id, rank, block, keys, false);
  trim_superblocks_after(db, run_id, last_step);
}

std::vector<int> block_ranks(Database& db, int64_t run_id) {
  // One seek per rank down the primary key (run_id, rank, block), not a walk of every block.
  Statement& st = db.cached(
      "SELECT rank FROM metric_blocks WHERE run_id = ? AND rank >= ? ORDER BY rank LIMIT 1");
  std::vector<int> ranks;
  int64_t from = std::numeric_limits<int64_t>::min();
  for (;;) {
    st.bind_all(run_id, from);
    if (!st.step()) break;
    const int64_t rank = st.int64(0);
    st.reset();
    ranks.push_back(static_cast<int>(rank));
    from = rank + 1;
  }
  st.reset();
  return ranks;
}

std::optional<BlockAggregates> read_aggregates(Database& db, Level level, int64_t run_id, int rank, int64_t unit) {
  Statement& read = db.cached(sql_of(level).read_one);
  read.bind_all(run_id, rank, unit);
  std::optional<BlockAggregates> stored;
  if (read.step()) stored = decode_block(read.blob(0));
  read.reset();
  return stored;
}

std::optional<BlockAggregates> merged_aggregates(Database& db, Level level, int64_t run_id, int rank,
                                                 int64_t first, int64_t last) {
  Statement& st = db.cached(sql_of(level).read_range);
  st.bind_all(run_id, rank, first, last);
  std::optional<BlockAggregates> merged;
  while (st.step()) {
    const BlockAggregates unit = decode_block(st.blob(1));
    if (!merged) merged.emplace(unit.size());
    merge_into(*merged, unit);
  }
  return merged;
}

std::vector<KeyBlock> read_key_blocks(Database& db, int64_t run_id, int rank, size_t key,
                                      int64_t first_block, int64_t last_block, Level level) {
  Statement& st = db.cached(sql_of(level).read_range);
  st.bind_all(run_id, rank, first_block, last_block);
  std::vector<KeyBlock> blocks;
  while (st.step()) {
    const KeyAggregate aggregate = decode_key(st.blob(1), key);
    if (aggregate.present()) blocks.push_back({st.int64(0), aggregate});
  }
  return blocks;
}

std::optional<int64_t> first_key_block(Database& db, int64_t run_id, int rank, size_t key,
                                       int64_t first_block, int64_t last_block) {
  Statement& st = db.cached(sql_of(Level::Block).read_range);
  st.bind_all(run_id, rank, first_block, last_block);
  std::optional<int64_t> first;
  while (!first && st.step())
    if (decode_key(st.blob(1), key).present()) first = st.int64(0);
  st.reset();
  return first;
}

std::map<int, KeyAggregate> aggregate_key_rows(Database& db, int64_t run_id, size_t key,
                                               std::span<const int> ranks, int64_t first_step,
                                               int64_t last_step) {
  const std::string column(metric_keys()[key]);
  // The range is at most a block's steps. A few ranks: a seek per step and wanted rank (a
  // walk read every rank's rows: rank 0 of a 4,096-rank run read 4,096 rows a step to keep
  // one, 30 ms a key). Every rank, or more than a block's worth of seeks a step: a walk of
  // the primary key (run_id, step, rank) over the range, keeping the wanted ranks.
  const bool seek = !ranks.empty() && ranks.size() <= static_cast<size_t>(kStepsPerBlock);
  Statement& st = seek ? db.cached(R"sql(
      WITH RECURSIVE steps(step) AS (SELECT ?2 UNION ALL SELECT step + 1 FROM steps WHERE step < ?3)
      SELECT m.rank, m.step, m.time, m.)sql" + column + R"sql(
      FROM steps CROSS JOIN json_each(?4) AS wanted CROSS JOIN metrics AS m
        ON m.run_id = ?1 AND m.step = steps.step AND m.rank = wanted.value
      WHERE m.)sql" + column + " IS NOT NULL")
                       : db.cached("SELECT rank, step, time, " + column +
                                   " FROM metrics WHERE run_id = ?1 AND step BETWEEN ?2 AND ?3 AND " + column +
                                   " IS NOT NULL");
  if (seek) st.bind_all(run_id, first_step, last_step, rank_array(ranks));
  else st.bind_all(run_id, first_step, last_step);
  std::map<int, KeyAggregate> found;
  while (st.step()) {
    const int rank = static_cast<int>(st.int64(0));
    if (!seek && !ranks.empty() && !std::binary_search(ranks.begin(), ranks.end(), rank)) continue;
    found[rank].add(st.int64(1), st.real(2), st.real(3));
  }
  return found;
}

std::optional<std::string> rank_array(std::span<const int> ranks) {
  if (ranks.empty()) return std::nullopt;
  std::string json = "[";
  for (size_t i = 0; i < ranks.size(); ++i) json += (i ? "," : "") + std::to_string(ranks[i]);
  return json + "]";
}

}  // namespace kiln::store
