// Recovery files: what a run's writer could not commit by the time the run ended (a full
// disk, a store it lost access to), kept so that nothing of the run is lost, and loaded into
// the store later by `kiln runs recover FILE` (docs/runs.md).
//
// A recovery file is a run store of its own (same schema, so SQLite checks it and every
// `kiln runs` reader can open it with --store) holding one run, the one it recovers, with
// the rows the queue still held, exactly as the writer would have committed them
// (batch_rows.h), and a table `kiln_recovery` saying which store and run they belong to and
// why they are here. A file without that table is not a recovery file and is refused.
#pragma once

#include <cstdint>
#include <string>

#include "store/write_queue.h"

namespace kiln::store {

// The run a batch belongs to, as the store knows it: loading checks that the store's run of
// that name is this one (same id and creation time), not another run that took the name.
struct RecoveryTarget {
  std::string store;  // the store's path (made absolute)
  int64_t run_id = 0;
  std::string run_name;
  double run_created_at = 0;
};

// Writes `batch` to a new recovery file, 0600 and never over an existing file: beside the
// store (STORE.run-ID-PID.recover) when its folder takes it, else in the temp folder
// ($TMPDIR, else /tmp). `why` is the store's failure, kept in the file and as an `error`
// event of the run. Returns the file's path; throws kiln::Error naming each place tried and
// why it failed when none could take it.
std::string save_recovery(const RecoveryTarget& target, const Batch& batch, const std::string& why);

// What loading a recovery file did.
struct RecoveryLoad {
  std::string store;  // where it loaded
  int64_t run_id = 0;
  std::string run_name;
  int64_t metric_rows = 0;  // rows new to the store (a row the store already holds is kept)
  int64_t other_rows = 0;   // validation, system, sample, expert-load and checkpoint rows
  int64_t events = 0;
  std::string status;       // the status it set, or empty when it left the run's as it was
  int64_t last_step = 0;    // the run's highest logged step afterwards
  bool nothing_new() const { return metric_rows == 0 && other_rows == 0 && events == 0 && status.empty(); }
};

// Loads a recovery file into `store`, or into the store it names when `store` is empty, in
// one transaction. Idempotent: rows and events the store already holds are skipped, so a
// second load adds nothing. The run's final status is set only while the store still shows
// the run live (running or paused), so a run resumed since keeps its newer record. Refuses,
// changing nothing (kiln::Error, one line): a file that is not a recovery file, a store that
// does not exist, a store without the run or whose run of that name is another one.
RecoveryLoad load_recovery(const std::string& file, const std::string& store = {});

}  // namespace kiln::store
