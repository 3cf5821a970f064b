#include "store/run_end.h"

#include "store/batch_rows.h"
#include "store/run_queries.h"
#include "store/types.h"
#include "store/write_queue.h"

namespace kiln::store {

bool fail_live_run(Database& db, int64_t run, double since, const std::string& error, double time) {
  // Immediate: the status read and the end written with no writer between them.
  Transaction tx(db);
  const RunRecord record = get_run(db, run);
  if (is_terminal(record.status) || record.attempt_started_at.value_or(record.created_at) < since) return false;
  // The rows a run's own end is written as, so that both read the same.
  Batch batch;
  batch.items.push_back(StatusChange{RunStatus::Failed, error, time});
  write_batch(db, run, batch, {}, time);
  tx.commit();
  return true;
}

}  // namespace kiln::store
