// The spread across ranks rolled up per block of 64 steps (table spread_blocks): per run and
// block (metric_blocks.h's kStepsPerBlock and block_of), each spread field's min, max, sum and
// count over the block's wide steps and their ranks, with the ranks at the min and the max,
// and the block's last wide step with its time and rank count. A chart of every rank of a long
// run reads these instead of a row a step (metric_spread.h's spread_series): 100,000 steps are
// 1,563 blocks.
//
// A block merges its steps' spreads in step order, so a tie keeps the earlier step's rank (and
// within a step the lower rank): the rule of the row walk, which merges steps in the same
// order, so a bucket of whole blocks answers what the walk of its rows answers. The writer
// keeps the blocks in the transaction that writes the spread rows (SpreadUpdate::write calls
// SpreadBlockUpdate); a rewind trims them (trim_spread_blocks_after); deleting a run deletes
// them with it (ON DELETE CASCADE). This file owns every statement on the table.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "store/database.h"
#include "store/metric_fields.h"
#include "store/metric_spread.h"

namespace kiln::store {

// The blocks of the spread rows one transaction writes: tell it each step written, then
// write() in the same transaction. A block whose written steps are all new wide steps after
// the last step it counts merges their spreads in: the commit of a training run's newest
// steps, nearly every commit, reads and writes one block row instead of reading up to 64
// spread rows of some 80 columns. Merging is exact only there: the block's ties already
// belong to earlier steps, as the rule wants, and nothing it counted changed. Any other
// block (a step's spread recomputed, extended by ranks of a later commit, or gone; a new step
// before the block's last) is recomputed from its spread rows, at most 64: a min or max cannot
// give back a value that a replaced row held, and a tie must go to the earlier step.
class SpreadBlockUpdate {
 public:
  // A wide step whose spread the table did not hold before this transaction.
  void added(const StepSpread& spread);
  // A step whose stored spread changed or went.
  void changed(int64_t step);
  // Writes every touched block and starts over empty.
  void write(Database& db, int64_t run_id);

 private:
  struct Pending {
    std::vector<StepSpread> added;  // in step order
    bool recompute = false;
  };
  std::map<int64_t, Pending> blocks_;  // by block
};

// After the caller deleted the run's spread rows past `last_step` (a rewind, rewind_rows.h):
// the blocks past it go, and the block holding it is recomputed from the rows it has left.
void trim_spread_blocks_after(Database& db, int64_t run_id, int64_t last_step);

// Migration 18: the blocks of every spread row already stored.
void build_spread_blocks(Database& db);

// One field's spread over a block, or over the part of one a step range cuts.
struct SpreadPart {
  int64_t step = 0;  // the last wide step counted, with its time and rank count
  double time = 0;
  int64_t ranks = 0;
  FieldSpread spread;  // absent: no rank of those steps had a value
};

struct FieldBlock {
  int64_t block = 0;
  SpreadPart part;
};

// The field's spread in each of the run's blocks first_block..last_block that exists, by block.
std::vector<FieldBlock> read_field_blocks(Database& db, int64_t run_id, const MetricField& field,
                                          int64_t first_block, int64_t last_block);

}  // namespace kiln::store
