// A run's end recorded by someone other than its own rank 0: the launcher that supervised it
// (launch/supervised_run.h). When a rank dies, mpirun kills every other rank a second later,
// and rank 0 does not always record the failure before that kill; the supervisor, which read
// from mpirun's output why the attempt failed, records it then.
#pragma once

#include <cstdint>
#include <string>

#include "store/database.h"

namespace kiln::store {

// Ends the run as failed with `error` at `time` (Unix seconds), with its `end` event, when the
// store still shows it live (created, running, paused, or lost to a stale heartbeat) in an
// attempt that began at or after `since` (a run of the same name left over from before, which
// the failed attempt never reached, is not its to end). A run that already ended keeps the end
// its rank 0 recorded, which says more. Returns whether it recorded the end. One transaction.
bool fail_live_run(Database& db, int64_t run, double since, const std::string& error, double time);

}  // namespace kiln::store
