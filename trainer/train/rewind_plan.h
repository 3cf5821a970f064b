// What a rewind past a loss spike does (docs/resilience.md#rewinding-past-a-loss-spike),
// decided from numbers alone so that each case is tested by hand: whether the run goes back
// and to which checkpoint, the data it skips, and the lines that say so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct RewindChoice {
  enum class Outcome { Rewind, NoCheckpoint, LimitReached };
  Outcome outcome = Outcome::NoCheckpoint;
  int64_t to_step = 0;  // Rewind: the checkpoint's step
  int64_t number = 0;   // Rewind: 1 for the run's first rewind, 2 for its second, ...
};

// done: the rewinds the run has made; most: alerts.max_rewinds; checkpoint_steps: the steps of
// the run's complete checkpoints. The newest checkpoint before the spike's step, while fewer
// than `most` rewinds are done.
RewindChoice choose_rewind(int64_t done, int64_t most, int64_t spike_step, const std::vector<int64_t>& checkpoint_steps);

// The global batches of data a rewind skips after its checkpoint, numbered from 1 as a run
// that never skipped trains them (batch N holds samples (N-1) x global_batch on).
struct SkippedData {
  int64_t first_batch = 0;
  int64_t batches = 0;
  int64_t data_position = 0;  // the samples read once past them: where the run reads on
};
SkippedData skip_after(int64_t consumed_samples, int64_t global_batch, int64_t batches);

// "skipping batches 201-400 of the data", "skipping batch 201 of the data", "skipping no data".
std::string skipped_text(const SkippedData& skipped);

// The `rewind` event's message: "from step 130 back to step 100 past the loss spike at step
// 120, skipping batches 101-300 of the data; rewind 1 of 3".
std::string rewind_message(int64_t from_step, int64_t to_step, int64_t spike_step, const SkippedData& skipped,
                           int64_t number, int64_t most);

// Why the run trains on past the spike at spike_step, one line without the "kiln: " prefix.
std::string no_rewind_message(const RewindChoice& choice, int64_t spike_step, int64_t most);

}  // namespace kiln
