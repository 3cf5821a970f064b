// The trainer's side of the store: rank 0 records one run through a RunWriter.
//
//   RunWriter writer("kiln-runs.db");
//   const int64_t run = writer.create_run(info);       // synchronous: returns the id
//   writer.log_metrics(rows_of_every_rank);            // each log interval; never blocks
//   for (const Command& c : writer.pending_commands()) // at a step boundary
//     writer.mark_command(c.id, CommandStatus::Applied, step);
//   writer.finish(RunStatus::Completed);
//   writer.close();                                    // at exit: wait for the disk, a while
//
// The log_* calls only queue: a background thread owns a connection and commits everything
// queued as one transaction (one per log interval while the disk keeps up), metric rows with
// their blocks (metric_blocks.h). When it does not,
// the queue thins old metric rows and records how many it dropped (write_queue.h). The thread
// also updates the run's heartbeat every heartbeat_interval_s, so a run whose process died
// reads as `lost`. create_run, pending_commands and mark_command use a second connection and
// return when done; they are rare and small. All methods may be called from any thread.
// At exit, close() waits a bounded time for the queue, then saves what the store could not
// take to a recovery file (run_recovery.h) rather than lose it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/database.h"
#include "store/types.h"
#include "store/write_queue.h"

namespace kiln::store {

struct WriterOptions {
  size_t max_queued_rows = 1 << 16;  // metric + system rows waiting before thinning starts
  double heartbeat_interval_s = 5;   // 0: heartbeats only with commits and heartbeat()
  int busy_timeout_ms = kDefaultBusyTimeoutMs;
  // Runs on the writer thread's connection once it is open (tests use it to set
  // PRAGMA max_page_count and simulate a full disk).
  std::function<void(Database&)> on_open;
};

// How long close() waits for the store at most: a lock held by another process clears in
// seconds (its busy timeout is 5 s). A failure that is not a lock gives up sooner: after
// kCloseGivesUpAfter failed commits in a row, since a full disk does not clear by itself.
inline constexpr std::chrono::seconds kCloseWait{30};
inline constexpr int kCloseGivesUpAfter = 3;

// What close() left behind.
struct WriterClose {
  std::string error;          // the last failed commit's message; empty: everything was committed
  size_t items_left = 0;      // queued items the store did not take (a batch of rows is one)
  std::string recovery_file;  // where they are now; empty with recovery_error when nowhere
  std::string recovery_error;
};

struct WriterStats {
  int64_t committed_transactions = 0;
  int64_t committed_metric_rows = 0;
  int64_t dropped_rows = 0;  // metric + system rows thinned away, all recorded as events
  int64_t failed_commits = 0;
  size_t queued_rows = 0;
  std::string last_error;  // the last failed commit's message; empty if none
};

// A checkpoint resuming the run of its name, as the trainer asks the store to continue it.
struct ResumeRequest {
  std::string checkpoint;  // the folder resumed from, for the `start` event
  int64_t step = 0;        // its step
  // The run is continued when it has ended only if this is that run going on: the user named
  // it (`--name NAME`, which `kiln runs resume` passes), or resumes its newest checkpoint with
  // the config unchanged (the alert hook aside: it is the command line's).
  bool named = false;
  bool unchanged = false;
  bool force = false;  // continue a run that still looks live: its process is gone
  // kiln train --max-restarts started this after the run failed: the time since the failure
  // counts against goodput (a run a user resumes was not meant to train in between).
  bool restart = false;
  // The seconds of the steps up to the checkpoint that survive (its TrainingState's);
  // nullopt: a checkpoint written before kiln measured them.
  std::optional<double> step_seconds;
};

struct ResumeOutcome {
  std::optional<int64_t> run_id;  // the run continued; nullopt: record a new run
  // Why a run of that name that has ended is not continued ("" when none, or continued).
  std::string another_training;
};

class RunWriter {
 public:
  // Opens (creating or migrating) the store for writing; fails here, not later, on a file
  // it cannot write.
  explicit RunWriter(const std::string& path, WriterOptions options = {});
  // Commits what it can (one more try on a failing disk) and stops the thread. Call
  // finish() and flush() first to know that everything was written.
  ~RunWriter();
  RunWriter(const RunWriter&) = delete;
  RunWriter& operator=(const RunWriter&) = delete;

  // Inserts the run as `running`, with a `start` event. A name already taken, or one that
  // check_run_name refuses, is refused, as is text that is not UTF-8; the command line is
  // stored redacted (user_text.h). One run per writer.
  int64_t create_run(const RunInfo& info);
  // Continues the run named info.name, which a checkpoint of it is resuming: the status
  // goes back to `running`, the end and error are cleared, goodput's clock adds the attempt
  // that ended (ResumeRequest::restart) and takes the checkpoint's step seconds, the record takes info's command
  // line, launch, host, pid and device, and a `start` event says where it resumed from. A run
  // that is still live (running or paused, heartbeat fresh) is refused, since two processes
  // must not record one run, unless its recording process is known to be gone (same host, no
  // process of its pid) or request.force says the caller knows it is. A run that has ended
  // is continued only as that same run (ResumeRequest), never by another training, whose
  // steps would interleave with its own: then nothing is written and the outcome says why.
  ResumeOutcome resume_run(const RunInfo& info, const ResumeRequest& request);
  int64_t run_id() const;

  // One log interval: every rank's row for the step(s). Rows with time 0 get now.
  // step_seconds: the seconds the run has spent in steps that survive, as of these rows.
  void log_metrics(std::vector<MetricRow> rows, std::optional<double> step_seconds = std::nullopt);
  void log_valid(ValidRow row);
  // A validation step's generated texts, one per prompt, all of the same step; each made
  // storable (user_text.h's storable_text, up to kMaxSampleBytes) rather than refused: it is
  // the model's, not the user's. Past kMaxSamplesPerStep, or of several steps, it throws
  // kiln::Error in one line.
  void log_samples(std::vector<Sample> samples);
  void log_system(std::vector<SystemRow> rows);
  // One logged step's routing, one load per MoE layer. Refused at once, in one line, when
  // check_expert_loads (expert_load.h) would be: past kMaxExpertLayers loads or
  // kMaxExpertsPerLayer experts, a layer index out of range, a negative count. Queued like
  // the rest; a stall thins whole steps (write_queue.h).
  void log_expert_loads(std::vector<ExpertLoad> loads);
  void log_event(std::string_view kind, std::string message,
                 std::optional<int64_t> step = std::nullopt);
  void log_checkpoint(Checkpoint checkpoint);  // also a `checkpoint` event
  // An alert and its `alert` event, written before it returns (alerts are rare and a hook
  // or an action may follow at once); returns the alert's id.
  int64_t log_alert(Alert alert);
  // A rewind past a loss spike (rewind_rows.h), written before it returns, after everything
  // queued before it: the rows of the steps it abandons must be in to be kept and forgotten.
  // Returns its id.
  int64_t log_rewind(Rewind rewind);
  // How many rewinds the run has made (a resumed run goes on counting).
  int64_t rewind_count();
  // Where each rank runs, written before it returns (once, when the run starts).
  void record_ranks(const std::vector<RankPlace>& places);
  void heartbeat();
  // Paused or running again (a `status` event).
  void set_status(RunStatus status);
  // Completed, stopped or failed: ends the run (ended_at, error, an `end` event) and stops
  // the heartbeats.
  void finish(RunStatus status, std::string error = {});

  // Waits until everything queued before the call is committed. If a commit fails meanwhile
  // it throws that failure (the rows stay queued and the thread keeps retrying).
  void flush();
  // At exit, after finish(): waits up to `wait` for everything queued to be committed (less
  // when commits keep failing for a reason other than a lock, kCloseGivesUpAfter), stops the
  // thread, and writes what is left to a recovery file that `kiln runs recover` loads into
  // the store. Never throws. Nothing may be logged after it.
  WriterClose close(std::chrono::milliseconds wait = kCloseWait);

  // Commands for this run that are still pending, oldest first.
  std::vector<Command> pending_commands();
  // Records the decision on a command and its `command` event, in one transaction.
  void mark_command(int64_t command_id, CommandStatus status, int64_t step,
                    const std::string& reason = {});

  WriterStats stats() const;

 private:
  void push(WriteItem item);
  void require_run() const;
  void require_no_run() const;
  void thread_main();
  void commit(const Batch& batch);
  void stop_thread();
  // Saves what the queue still holds after the thread stopped (close()).
  void save_left(Batch left, WriterClose& result);

  std::string path_;
  WriterOptions options_;
  std::unique_ptr<Database> db_;       // the writer thread's
  std::unique_ptr<Database> sync_db_;  // create_run, commands; guarded by sync_mutex_
  std::mutex sync_mutex_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::condition_variable committed_;
  WriteQueue queue_;
  int64_t run_id_ = 0;
  bool finished_ = false;  // finish() queued: no more automatic heartbeats
  bool stopping_ = false;
  bool closed_ = false;  // close() ran: the thread is gone, nothing more is taken
  uint64_t pushed_seq_ = 0;     // items pushed so far
  uint64_t committed_seq_ = 0;  // all items up to here are committed (or counted as dropped)
  WriterStats stats_;
  std::string unreported_error_;  // a failure to record as an event once commits work again
  int64_t unreported_failures_ = 0;
  int failures_in_a_row_ = 0;      // failed commits since the last one that worked
  bool last_failure_locked_ = false;  // the last failure was another process's lock

  std::thread thread_;
};

}  // namespace kiln::store
