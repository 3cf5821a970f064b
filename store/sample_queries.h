// Reading the text a run's model generated at its validation steps (RunWriter::log_sample).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// The newest `limit` samples after `after_step`, oldest first. A sample is up to
// 2 x kMaxSampleBytes, so callers that hand them on bound `limit`.
std::vector<Sample> list_samples(Database& db, int64_t run_id, size_t limit,
                                 int64_t after_step = std::numeric_limits<int64_t>::min());

// Every sample of the latest step that has any (one per prompt), by slot; none: empty.
std::vector<Sample> latest_samples(Database& db, int64_t run_id);

}  // namespace kiln::store
