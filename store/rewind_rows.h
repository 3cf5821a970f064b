// A run's rewinds past its loss spikes (docs/resilience.md#rewinding-past-a-loss-spike): one
// row each, with rank 0's losses at the steps it abandoned and a `rewind` event, written in the
// transaction that forgets those steps' rows. The run's tables then hold the steps it trains
// from there on, which replace the abandoned ones, and no reader sees both.
#pragma once

#include <cstdint>
#include <vector>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// The longest rewind message kept (the trainer's one line).
inline constexpr size_t kMaxRewindMessageBytes = 1024;

// Records `rewind` in the caller's transaction: its row; rank 0's logged losses past
// rewind.to_step, which it abandoned (rewind.losses is not read: the metrics table has them);
// the rows of every step past to_step removed from metrics (their blocks recomputed),
// metric_spread (its blocks likewise), valid_metrics, samples, expert_loads and checkpoints;
// and its `rewind` event at to_step.
// Returns the rewind's id.
int64_t insert_rewind(Database& db, int64_t run_id, const Rewind& rewind);
// A run's rewinds, oldest first, each with its abandoned losses in step order.
std::vector<Rewind> list_rewinds(Database& db, int64_t run_id);
// How many rewinds the run has made.
int64_t rewind_count(Database& db, int64_t run_id);

}  // namespace kiln::store
