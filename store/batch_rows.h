// The rows one queued batch (write_queue.h) becomes in a run's store: the batch's items in
// order, the metric blocks of its rows, a `dropped` event for what thinning removed, an
// optional note, and the run's heartbeat. The RunWriter writes its commits through here, and
// a recovery file (run_recovery.h) the batch that the store could not take, so both hold the
// same rows.
#pragma once

#include <cstdint>
#include <string>

#include "store/database.h"
#include "store/write_queue.h"

namespace kiln::store {

// Inside the caller's transaction. `note`, when not empty, is an `error` event stamped `now`,
// as is the `dropped` event; the heartbeat becomes `now`.
void write_batch(Database& db, int64_t run, const Batch& batch, const std::string& note, double now);

}  // namespace kiln::store
