#include "store/run_writer.h"

#include <sqlite3.h>

#include <ctime>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/human_format.h"
#include "base/run_names.h"
#include "base/utf8.h"
#include "store/alert_rows.h"
#include "store/batch_rows.h"
#include "store/commands.h"
#include "store/error.h"
#include "store/expert_load.h"
#include "store/rank_places.h"
#include "store/rewind_rows.h"
#include "store/rows.h"
#include "store/run_figures.h"
#include "store/run_launch.h"
#include "store/run_queries.h"
#include "store/run_recovery.h"
#include "store/schema.h"
#include "store/user_text.h"

namespace kiln::store {
namespace {

// Failures worth retrying with the rows kept: the disk or the lock may come back. Anything
// else (a constraint, a damaged file) would fail the same way forever.
bool is_transient(int code) {
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_NOMEM:
    case SQLITE_PROTOCOL:
      return true;
    default:
      return false;
  }
}

// What the store keeps of a run's description: text checked at the door (user_text.h) and
// the command line without its secrets.
RunInfo checked(RunInfo info) {
  check_run_name(info.name);
  for (const auto& tag : info.tags) require_utf8(tag, "the tag");
  require_utf8(info.notes, "the notes");
  require_utf8(info.config_json, "the config");
  require_utf8(info.workdir, "the working folder");
  if (info.world_size && *info.world_size <= 0) info.world_size.reset();
  if (info.launch) {
    require_utf8(info.launch->serve, "the dashboard's address");
    for (const auto& host : info.launch->allowed_hosts) require_utf8(host, "the allowed host");
  }
  info.command_line = redact_command_line(info.command_line);
  // A plan the planner could not make (no time, no bytes) is kept as no plan.
  if (!(std::isfinite(info.planned_step_s) && info.planned_step_s > 0)) info.planned_step_s = kNoValue;
  if (info.planned_memory_bytes && *info.planned_memory_bytes <= 0) info.planned_memory_bytes.reset();
  return info;
}

std::optional<int64_t> stored_pid(int64_t pid) {
  return pid > 0 ? std::optional<int64_t>(pid) : std::nullopt;
}

std::optional<std::string> stored_launch(const std::optional<RunLaunch>& launch) {
  return launch ? std::optional<std::string>(launch_to_json(*launch)) : std::nullopt;
}

// What a batch that can never be written loses, so it is still counted.
Dropped dropped_by(const Batch& batch) {
  Dropped d = batch.dropped;
  for (const auto& item : batch.items) d.merge(dropped_of(item));
  return d;
}

// Why resuming `run` from the request's checkpoint is another training rather than that run
// going on, or "": a run that has ended (a crash's `lost` aside) goes on only when named or
// from its newest checkpoint with the config it had.
std::string another_training(Database& db, const RunRecord& run, const ResumeRequest& request) {
  if (is_live(run.status) || run.status == RunStatus::Lost || request.named) return {};
  std::optional<int64_t> newest;
  for (const Checkpoint& c : list_checkpoints(db, run.id))
    if (!newest || c.step > *newest) newest = c.step;
  const std::string ended = "run '" + run.name + "' (id " + std::to_string(run.id) + ") has ended (" +
                            std::string(to_string(run.status)) + ")";
  if (newest != request.step)
    return ended + " and its newest checkpoint is " + (newest ? "at step " + std::to_string(*newest) : "none") +
           ", not this one at step " + std::to_string(request.step);
  if (!request.unchanged) return ended + " and this training changes its config";
  return {};
}

// The wall seconds goodput counts for the run once this attempt starts at `now`: those of its
// earlier attempts, plus the one that ended, to its end (or its last heartbeat when it was
// lost); for an automatic restart also the time since, which the failure cost. A run a user
// stopped and resumes later was not meant to train in between.
double counted_seconds(const RunRecord& run, const ResumeRequest& request, double now) {
  if (!run.attempt_started_at) return run.counted_seconds;  // recorded before schema 12
  const double ended = request.restart ? now : run.ended_at.value_or(run.heartbeat_at.value_or(now));
  return run.counted_seconds + std::max(0.0, ended - *run.attempt_started_at);
}

}  // namespace

RunWriter::RunWriter(const std::string& path, WriterOptions options)
    : path_(path), options_(std::move(options)), queue_(options_.max_queued_rows) {
  db_ = open_store(path_, Access::ReadWrite, options_.busy_timeout_ms);
  sync_db_ = open_store(path_, Access::ReadWrite, options_.busy_timeout_ms);
  if (options_.on_open) options_.on_open(*db_);
  thread_ = std::thread([this] { thread_main(); });
}

RunWriter::~RunWriter() { stop_thread(); }

void RunWriter::stop_thread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t RunWriter::create_run(const RunInfo& typed) {
  std::lock_guard sync(sync_mutex_);
  require_no_run();
  const RunInfo info = checked(typed);

  Database& db = *sync_db_;
  const double now = unix_now();
  Transaction tx(db);
  Statement& existing = db.cached("SELECT id FROM runs WHERE name = ?");
  existing.bind(1, info.name);
  if (existing.step()) {
    const int64_t id = existing.int64(0);
    existing.reset();
    fail("store: a run named '" + info.name + "' already exists in " + path_ + " (id " +
         std::to_string(id) + "); choose another name");
  }
  // A fork names its parent; a parent this store does not hold (another store's run) is
  // left unlinked rather than refused.
  std::optional<int64_t> parent_id;
  if (!info.parent_name.empty()) {
    Statement& parent = db.cached("SELECT id FROM runs WHERE name = ?");
    parent.bind(1, info.parent_name);
    if (parent.step()) parent_id = parent.int64(0);
    parent.reset();
  }
  Statement& insert = db.cached(
      "INSERT INTO runs (name, status, config_json, layout, backend, device, host, command_line, "
      "pid, created_at, started_at, heartbeat_at, tags, notes, planned_step_s, planned_memory_bytes, "
      "workdir, world_size, sweep_id, sweep_point, parent_id, parent_step, launch, attempt_started_at) "
      "VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind_all(info.name, info.config_json.empty() ? std::string("{}") : info.config_json,
                  info.layout, info.backend, info.device, info.host, info.command_line,
                  stored_pid(info.pid), now, now, now, nlohmann::json(info.tags).dump(), info.notes,
                  info.planned_step_s, info.planned_memory_bytes, info.workdir, info.world_size,
                  info.sweep_id, info.sweep_point, parent_id,
                  parent_id ? info.parent_step : std::nullopt, stored_launch(info.launch), now);
  insert.run();
  const int64_t id = db.last_insert_rowid();
  std::string message = parent_id ? "forked from " + info.parent_name + " at step " +
                                        std::to_string(info.parent_step.value_or(0)) + ", started"
                                  : "started";
  if (!info.host.empty()) message += " on " + info.host;
  if (!info.backend.empty()) message += ", " + info.backend;
  if (!info.device.empty()) message += " (" + info.device + ")";
  if (!info.layout.empty()) message += ", layout " + info.layout;
  insert_event(db, id, Event{0, now, std::nullopt, std::string(event_kind::kStart), message});
  tx.commit();

  {
    std::lock_guard lock(mutex_);
    run_id_ = id;
  }
  wake_.notify_all();  // the heartbeat clock starts
  return id;
}

ResumeOutcome RunWriter::resume_run(const RunInfo& typed, const ResumeRequest& request) {
  std::lock_guard sync(sync_mutex_);
  require_no_run();
  const RunInfo info = checked(typed);
  Database& db = *sync_db_;
  const double now = unix_now();
  Transaction tx(db);
  Statement& existing = db.cached("SELECT id FROM runs WHERE name = ?");
  existing.bind(1, info.name);
  if (!existing.step()) {
    existing.reset();
    return {};
  }
  const int64_t id = existing.int64(0);
  existing.reset();
  const RunRecord run = get_run(db, id);
  if (const std::string why = another_training(db, run, request); !why.empty()) return {std::nullopt, why};
  std::string message = "resumed from " + request.checkpoint;
  if (!info.host.empty()) message += " on " + info.host;
  const double last_sign = run.heartbeat_at.value_or(run.started_at.value_or(run.created_at));
  if (is_live(run.status)) {
    const std::string process = (run.pid ? "pid " + std::to_string(*run.pid) + " " : std::string()) +
                                (run.host.empty() ? "" : "on " + run.host + ", ");
    if (recorder_gone(run, info.host)) {
      message += "; the run looked lost since " + local_time_text(last_sign, "%H:%M:%S") + " (its pid " +
                 std::to_string(*run.pid) + " is gone)";
    } else if (request.force) {
      message += "; forced while it still looked " + std::string(to_string(run.status));
    } else {
      fail("store: run '" + info.name + "' (id " + std::to_string(id) + ") is still " +
           std::string(to_string(run.status)) + " in another process (" + process + "last heartbeat " +
           std::to_string(static_cast<int64_t>(std::max(0.0, now - last_sign))) +
           " s ago); stop it first, resume under another --name, or give --force if that process is gone");
    }
  } else if (run.status == RunStatus::Lost) {
    message += "; the run looked lost since " + local_time_text(last_sign, "%H:%M:%S");
  }
  Statement& update = db.cached(
      "UPDATE runs SET status = 'running', ended_at = NULL, error = NULL, heartbeat_at = ?, "
      "config_json = ?, layout = ?, backend = ?, device = ?, host = ?, command_line = ?, pid = ?, "
      "planned_step_s = ?, planned_memory_bytes = ?, workdir = ?, world_size = ?, launch = ?, "
      "step_seconds = ?, counted_seconds = ?, attempt_started_at = ? WHERE id = ?");
  update.bind_all(now, info.config_json.empty() ? std::string("{}") : info.config_json,
                  info.layout, info.backend, info.device, info.host, info.command_line,
                  stored_pid(info.pid), info.planned_step_s, info.planned_memory_bytes, info.workdir,
                  info.world_size, stored_launch(info.launch), request.step_seconds,
                  counted_seconds(run, request, now), now, id);
  update.run();
  insert_event(db, id, Event{0, now, std::nullopt, std::string(event_kind::kStart), message});
  tx.commit();

  {
    std::lock_guard lock(mutex_);
    run_id_ = id;
  }
  wake_.notify_all();
  return {id, {}};
}

int64_t RunWriter::run_id() const {
  std::lock_guard lock(mutex_);
  return run_id_;
}

void RunWriter::require_no_run() const {
  std::lock_guard lock(mutex_);
  if (run_id_ != 0)
    fail("store: this writer already records run " + std::to_string(run_id_) +
         "; use one RunWriter per run");
}

void RunWriter::require_run() const {
  if (run_id_ == 0) fail("store: log before create_run: the writer has no run yet");
}

void RunWriter::push(WriteItem item) {
  {
    std::lock_guard lock(mutex_);
    require_run();
    if (closed_) fail("store: log after close: the writer of " + path_ + " has stopped");
    queue_.push(std::move(item));
    ++pushed_seq_;
  }
  wake_.notify_one();
}

void RunWriter::log_metrics(std::vector<MetricRow> rows, std::optional<double> step_seconds) {
  const double now = unix_now();
  for (auto& r : rows)
    if (!(r.time > 0)) r.time = now;
  push(MetricBatch{std::move(rows), step_seconds});
}

void RunWriter::log_valid(ValidRow row) {
  if (!(row.time > 0)) row.time = unix_now();
  push(row);
}

void RunWriter::log_samples(std::vector<Sample> samples) {
  if (samples.empty()) return;
  if (samples.size() > kMaxSamplesPerStep)
    fail("store: " + std::to_string(samples.size()) + " samples at step " + std::to_string(samples.front().step) +
         "; a step keeps at most " + std::to_string(kMaxSamplesPerStep));
  const double now = unix_now();
  for (Sample& sample : samples) {
    if (sample.step != samples.front().step)
      fail("store: samples of steps " + std::to_string(samples.front().step) + " and " +
           std::to_string(sample.step) + " logged as one step's");
    if (!(sample.time > 0)) sample.time = now;
    sample.prompt = storable_text(sample.prompt, kMaxSampleBytes);
    sample.text = storable_text(sample.text, kMaxSampleBytes);
  }
  push(SampleBatch{std::move(samples)});
}

void RunWriter::log_system(std::vector<SystemRow> rows) {
  const double now = unix_now();
  for (auto& r : rows)
    if (!(r.time > 0)) r.time = now;
  push(SystemBatch{std::move(rows)});
}

void RunWriter::log_expert_loads(std::vector<ExpertLoad> loads) {
  check_expert_loads(loads);
  if (loads.empty()) return;
  push(ExpertBatch{std::move(loads)});
}

void RunWriter::log_event(std::string_view kind, std::string message,
                          std::optional<int64_t> step) {
  push(Event{0, unix_now(), step, std::string(kind), std::move(message)});
}

void RunWriter::log_checkpoint(Checkpoint checkpoint) {
  if (!(checkpoint.time > 0)) checkpoint.time = unix_now();
  push(std::move(checkpoint));
}

void RunWriter::heartbeat() { push(Heartbeat{}); }

void RunWriter::set_status(RunStatus status) {
  if (status != RunStatus::Running && status != RunStatus::Paused)
    fail("store: set_status takes running or paused; end a run with finish()");
  push(StatusChange{status, {}, unix_now()});
}

void RunWriter::finish(RunStatus status, std::string error) {
  if (!is_terminal(status))
    fail("store: finish takes completed, stopped or failed, not " + std::string(to_string(status)));
  push(StatusChange{status, std::move(error), unix_now()});
  std::lock_guard lock(mutex_);
  finished_ = true;
}

void RunWriter::flush() {
  std::unique_lock lock(mutex_);
  const uint64_t target = pushed_seq_;
  const int64_t failures = stats_.failed_commits;
  wake_.notify_one();
  committed_.wait(lock, [&] {
    return committed_seq_ >= target || stats_.failed_commits > failures;
  });
  if (committed_seq_ < target)
    fail(stats_.last_error + " (" + std::to_string(queue_.rows()) +
         " rows still queued; the writer keeps retrying)");
}

WriterClose RunWriter::close(std::chrono::milliseconds wait) {
  WriterClose result;
  {
    std::unique_lock lock(mutex_);
    if (closed_) return result;
    const uint64_t target = pushed_seq_;
    wake_.notify_one();
    committed_.wait_for(lock, wait, [&] {
      return committed_seq_ >= target || (failures_in_a_row_ >= kCloseGivesUpAfter && !last_failure_locked_);
    });
  }
  // The thread makes one more try as it stops; what it leaves queued was not committed.
  stop_thread();
  std::unique_lock lock(mutex_);
  closed_ = true;
  Batch left = queue_.take();
  if (left.items.empty() && !left.dropped.any()) return result;
  result.error = failures_in_a_row_ > 0 ? stats_.last_error
                                        : "store: " + path_ + " was still busy after " +
                                              std::to_string(wait.count() / 1000) + " s";
  result.items_left = left.items.size();
  lock.unlock();
  save_left(std::move(left), result);
  return result;
}

void RunWriter::save_left(Batch left, WriterClose& result) {
  try {
    RecoveryTarget target;
    target.store = std::filesystem::absolute(path_).string();
    target.run_id = run_id();
    {
      // Reading works on a full disk; the run's creation time tells it from a later run
      // that takes its name.
      std::lock_guard sync(sync_mutex_);
      Statement& run = sync_db_->cached("SELECT name, created_at FROM runs WHERE id = ?");
      run.bind(1, target.run_id);
      if (!run.step()) fail("store: run " + std::to_string(target.run_id) + " is no longer in " + path_);
      target.run_name = run.text(0);
      target.run_created_at = run.real(1);
      run.reset();
    }
    result.recovery_file = save_recovery(target, left, result.error);
  } catch (const std::exception& e) {
    result.recovery_error = e.what();
  }
}

std::vector<Command> RunWriter::pending_commands() {
  const int64_t run = run_id();
  if (run == 0) return {};
  std::lock_guard sync(sync_mutex_);
  return store::pending_commands(*sync_db_, run);
}

int64_t RunWriter::log_alert(Alert alert) {
  std::lock_guard sync(sync_mutex_);
  const int64_t run = run_id();
  if (run == 0) fail("store: log before create_run: the writer has no run yet");
  Transaction tx(*sync_db_);
  const int64_t id = insert_alert(*sync_db_, run, alert);
  tx.commit();
  return id;
}

int64_t RunWriter::log_rewind(Rewind rewind) {
  flush();
  std::lock_guard sync(sync_mutex_);
  const int64_t run = run_id();
  if (run == 0) fail("store: log before create_run: the writer has no run yet");
  Transaction tx(*sync_db_);
  const int64_t id = insert_rewind(*sync_db_, run, rewind);
  tx.commit();
  return id;
}

int64_t RunWriter::rewind_count() {
  std::lock_guard sync(sync_mutex_);
  const int64_t run = run_id();
  if (run == 0) fail("store: read before create_run: the writer has no run yet");
  return store::rewind_count(*sync_db_, run);
}

void RunWriter::record_ranks(const std::vector<RankPlace>& places) {
  std::lock_guard sync(sync_mutex_);
  const int64_t run = run_id();
  if (run == 0) fail("store: log before create_run: the writer has no run yet");
  Transaction tx(*sync_db_);
  write_rank_places(*sync_db_, run, places);
  tx.commit();
}

void RunWriter::mark_command(int64_t command_id, CommandStatus status, int64_t step,
                             const std::string& reason) {
  std::lock_guard sync(sync_mutex_);
  store::mark_command(*sync_db_, command_id, status, step, reason);
}

WriterStats RunWriter::stats() const {
  std::lock_guard lock(mutex_);
  WriterStats s = stats_;
  s.dropped_rows = queue_.dropped_total();
  s.queued_rows = queue_.rows();
  return s;
}

void RunWriter::thread_main() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.heartbeat_interval_s));
  auto next_beat = Clock::now() + interval;
  auto backoff = std::chrono::milliseconds(50);

  std::unique_lock lock(mutex_);
  for (;;) {
    const auto beats = [&] { return interval.count() > 0 && run_id_ != 0 && !finished_; };
    if (queue_.empty() && !stopping_) {
      if (beats())
        wake_.wait_until(lock, next_beat, [&] { return !queue_.empty() || stopping_; });
      else
        wake_.wait(lock, [&] { return !queue_.empty() || stopping_ || beats(); });
    }
    if (queue_.empty()) {
      if (stopping_) break;
      if (!beats() || Clock::now() < next_beat) continue;
      queue_.push(Heartbeat{});  // nothing else to commit: the heartbeat is the commit
    }

    Batch batch = queue_.take();
    const uint64_t seq = pushed_seq_;
    lock.unlock();

    std::string error;
    bool transient = false;
    bool locked = false;
    try {
      commit(batch);
    } catch (const DatabaseError& e) {
      error = e.what();
      transient = is_transient(e.code);
      locked = (e.code & 0xff) == SQLITE_BUSY || (e.code & 0xff) == SQLITE_LOCKED;
    } catch (const std::exception& e) {
      error = e.what();
    }

    lock.lock();
    if (error.empty()) {
      committed_seq_ = seq;
      ++stats_.committed_transactions;
      for (const auto& item : batch.items)
        if (const auto* m = std::get_if<MetricBatch>(&item))
          stats_.committed_metric_rows += static_cast<int64_t>(m->rows.size());
      backoff = std::chrono::milliseconds(50);
      next_beat = Clock::now() + interval;
      failures_in_a_row_ = 0;
      committed_.notify_all();
      continue;
    }

    ++stats_.failed_commits;
    ++failures_in_a_row_;
    last_failure_locked_ = locked;
    stats_.last_error = error;
    unreported_error_ = error;
    ++unreported_failures_;
    if (transient) {
      queue_.put_back(std::move(batch));
    } else {
      // These rows can never be written; count them so the loss is recorded if the store
      // recovers (committed_seq_ moves on: nobody should wait for them).
      queue_.put_back(Batch{{}, dropped_by(batch)});
      committed_seq_ = seq;
    }
    committed_.notify_all();
    if (stopping_) break;  // the destructor's one more try has failed too
    wake_.wait_for(lock, backoff, [&] { return stopping_; });
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

void RunWriter::commit(const Batch& batch) {
  Database& db = *db_;
  int64_t run = 0;
  std::string error_note;
  {
    std::lock_guard lock(mutex_);
    run = run_id_;
    if (!unreported_error_.empty())
      error_note = "store writes failed " + std::to_string(unreported_failures_) +
                   " time(s), then recovered; last: " + unreported_error_;
  }
  Transaction tx(db);
  write_batch(db, run, batch, error_note, unix_now());
  tx.commit();

  if (!error_note.empty()) {
    std::lock_guard lock(mutex_);
    unreported_error_.clear();
    unreported_failures_ = 0;
  }
}

}  // namespace kiln::store
