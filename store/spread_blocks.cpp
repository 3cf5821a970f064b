#include "store/spread_blocks.h"

#include <limits>
#include <optional>
#include <string>

#include "store/metric_blocks.h"
#include "store/spread_columns.h"

namespace kiln::store {
namespace {

// A block's row: its wide steps' spreads merged in step order, and its last wide step.
struct SpreadBlockRow {
  int64_t step = 0;
  double time = 0;
  int64_t ranks = 0;
  std::vector<FieldSpread> fields;

  // Folds in a wide step after every step the block counts.
  void add(const StepSpread& later) {
    if (fields.size() < later.fields.size()) fields.resize(later.fields.size());
    for (size_t k = 0; k < later.fields.size(); ++k) fields[k].merge(later.fields[k]);
    step = later.step;
    time = later.time;
    ranks = later.ranks;
  }
};

std::string spread_block_insert_sql(SpreadFieldList fields) {
  return "INSERT OR REPLACE INTO spread_blocks (run_id, block, step, time, ranks, " + spread_column_list(fields) +
         ") VALUES (?, ?, ?, ?, ?" + spread_placeholders(fields) + ")";
}

// Writes the block's row with the columns `sql` names (spread_block_insert_sql of the current
// list's fields, or of a migration's: as many as the row holds).
void store_spread_block(Database& db, int64_t run_id, int64_t block, const SpreadBlockRow& row,
                        const std::string& sql) {
  Statement& st = db.cached(sql);
  st.bind_all(run_id, block, row.step, row.time, row.ranks);
  bind_spreads(st, 6, row.fields);
  st.run();
}

void store_spread_block(Database& db, int64_t run_id, int64_t block, const SpreadBlockRow& row) {
  static const std::string sql = spread_block_insert_sql(spread_fields());
  store_spread_block(db, run_id, block, row, sql);
}

std::optional<SpreadBlockRow> stored_spread_block(Database& db, int64_t run_id, int64_t block) {
  static const std::string sql = "SELECT step, time, ranks, " + spread_column_list(spread_fields()) +
                                 " FROM spread_blocks WHERE run_id = ? AND block = ?";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, block);
  std::optional<SpreadBlockRow> row;
  if (st.step())
    row = SpreadBlockRow{st.int64(0), st.real(1), st.int64(2), read_spreads(st, 3, spread_fields().size())};
  st.reset();
  return row;
}

// The block again from the spread rows it holds now; without any, it goes.
void recompute_spread_block(Database& db, int64_t run_id, int64_t block) {
  std::optional<SpreadBlockRow> row;
  for_each_spread(db, run_id, first_step_of(block), last_step_of(block), spread_fields(), [&](const StepSpread& s) {
    if (!row) row.emplace();
    row->add(s);
  });
  if (row) {
    store_spread_block(db, run_id, block, *row);
    return;
  }
  Statement& st = db.cached("DELETE FROM spread_blocks WHERE run_id = ? AND block = ?");
  st.bind_all(run_id, block);
  st.run();
}

}  // namespace

void SpreadBlockUpdate::added(const StepSpread& spread) { blocks_[block_of(spread.step)].added.push_back(spread); }

void SpreadBlockUpdate::changed(int64_t step) { blocks_[block_of(step)].recompute = true; }

void SpreadBlockUpdate::write(Database& db, int64_t run_id) {
  for (const auto& [block, p] : blocks_) {
    // The steps come in order (SpreadUpdate walks them by step): all after the stored block's
    // last step, they append.
    std::optional<SpreadBlockRow> row;
    if (!p.recompute) row = stored_spread_block(db, run_id, block);
    if (p.recompute || (row && row->step >= p.added.front().step)) {
      recompute_spread_block(db, run_id, block);
      continue;
    }
    if (!row) row.emplace();
    for (const StepSpread& s : p.added) row->add(s);
    store_spread_block(db, run_id, block, *row);
  }
  blocks_.clear();
}

void trim_spread_blocks_after(Database& db, int64_t run_id, int64_t last_step) {
  const int64_t block = block_of(last_step);
  Statement& past = db.cached("DELETE FROM spread_blocks WHERE run_id = ? AND block > ?");
  past.bind_all(run_id, block);
  past.run();
  recompute_spread_block(db, run_id, block);
}

void build_spread_blocks(Database& db) {
  // The fields whose columns both tables have at this version: a later field's come with its own.
  const std::vector<const MetricField*> fields = spread_fields_at(kSpreadBlocksSince);
  const std::string sql = spread_block_insert_sql(fields);
  std::vector<int64_t> runs;
  for (Statement st(db, "SELECT id FROM runs ORDER BY id"); st.step();) runs.push_back(st.int64(0));
  for (const int64_t run : runs) {
    // One walk of the run's spread rows, a block closed as the next one starts.
    std::optional<int64_t> block;
    SpreadBlockRow row;
    for_each_spread(db, run, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), fields,
                    [&](const StepSpread& s) {
                      if (block && *block != block_of(s.step)) {
                        store_spread_block(db, run, *block, row, sql);
                        row = SpreadBlockRow{};
                      }
                      block = block_of(s.step);
                      row.add(s);
                    });
    if (block) store_spread_block(db, run, *block, row, sql);
  }
}

std::vector<FieldBlock> read_field_blocks(Database& db, int64_t run_id, const MetricField& field,
                                          int64_t first_block, int64_t last_block) {
  const MetricField* const one[] = {&field};
  Statement& st = db.cached("SELECT block, step, time, ranks, " + spread_column_list(one) +
                            " FROM spread_blocks WHERE run_id = ? AND block BETWEEN ? AND ? ORDER BY block");
  st.bind_all(run_id, first_block, last_block);
  std::vector<FieldBlock> blocks;
  while (st.step())
    blocks.push_back({st.int64(0), SpreadPart{st.int64(1), st.real(2), st.int64(3), read_spread(st, 4)}});
  return blocks;
}

}  // namespace kiln::store
