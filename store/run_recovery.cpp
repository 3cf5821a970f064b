#include "store/run_recovery.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "base/human_format.h"
#include "base/private_files.h"
#include "store/batch_rows.h"
#include "store/error.h"
#include "store/metric_blocks.h"
#include "store/metric_spread.h"
#include "store/rows.h"
#include "store/run_figures.h"
#include "store/schema.h"

namespace kiln::store {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSecondFormat = "%Y-%m-%d %H:%M:%S";  // strftime's, to the second

constexpr const char* kRecoveryTable = R"sql(
CREATE TABLE kiln_recovery (
  store          TEXT NOT NULL,     -- the store the rows belong in
  run_id         INTEGER NOT NULL,  -- the run there, by id, name and creation time
  run_name       TEXT NOT NULL,
  run_created_at REAL NOT NULL,
  written_at     REAL NOT NULL,
  reason         TEXT NOT NULL,     -- why the store could not take them
  status_changed INTEGER NOT NULL   -- 1: the run's status in this file's runs row is its last
)
)sql";

bool changes_status(const Batch& batch) {
  for (const auto& item : batch.items)
    if (std::holds_alternative<StatusChange>(item)) return true;
  return false;
}

void write_recovery_file(const std::string& file, const RecoveryTarget& target, const Batch& batch,
                         const std::string& why) {
  Database db(file, Access::ReadWrite);
  migrate(db, migrations());
  // Rollback journal mode (a new file's): FILE-journal exists only while the transaction
  // runs, so the recovery is one file.
  const double now = unix_now();
  Transaction tx(db);
  db.exec(kRecoveryTable);
  Statement run(db, "INSERT INTO runs (id, name, status, created_at) VALUES (?, ?, 'running', ?)");
  run.bind_all(target.run_id, target.run_name, target.run_created_at);
  run.run();
  write_batch(db, target.run_id, batch,
              "the store could not take these rows when the run ended (" + why + "); they were saved to " +
                  file + " for kiln runs recover",
              now);
  Statement header(db, "INSERT INTO kiln_recovery VALUES (?, ?, ?, ?, ?, ?, ?)");
  header.bind_all(target.store, target.run_id, target.run_name, target.run_created_at, now, why,
                  changes_status(batch) ? 1 : 0);
  header.run();
  tx.commit();
}

struct Header {
  std::string store;
  int64_t run_id = 0;
  std::string run_name;
  double run_created_at = 0;
  bool status_changed = false;
};

std::unique_ptr<Database> open_recovery(const std::string& file) {
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (!fs::exists(st)) fail("recover: no file " + file);
  if (!fs::is_regular_file(st)) fail("recover: " + file + " is not a regular file, so not a recovery file");
  std::unique_ptr<Database> db;
  try {
    db = open_store(file, Access::ReadOnly);
  } catch (const Error& e) {
    fail("recover: " + file + " is not a kiln recovery file (" + e.what() + ")");
  }
  if (db->query_int("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'kiln_recovery'") == 0)
    fail("recover: " + file +
         " is a run store, not a recovery file (kiln writes one when a run ends with rows its store "
         "could not take); read it with --store");
  return db;
}

Header read_header(Database& db, const std::string& file) {
  Statement st(db, "SELECT store, run_id, run_name, run_created_at, status_changed FROM kiln_recovery");
  if (!st.step()) fail("recover: " + file + " is damaged (it names no store)");
  Header h{st.text(0), st.int64(1), st.text(2), st.real(3), st.int64(4) != 0};
  if (st.step()) fail("recover: " + file + " is damaged (it names more than one store)");
  const std::string name_of_run = [&] {
    Statement run(db, "SELECT name FROM runs WHERE id = ?");
    run.bind(1, h.run_id);
    return run.step() ? run.text(0) : std::string();
  }();
  if (name_of_run != h.run_name || db.query_int("SELECT count(*) FROM runs") != 1)
    fail("recover: " + file + " is damaged (its rows are not those of run '" + h.run_name + "' alone)");
  return h;
}

std::string existing_store(const std::string& path, const std::string& file) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) == 0)
    fail("recover: no run store at " + path + ", where " + file +
         "'s rows belong; give --store PATH if the store has moved");
  return path;
}

// True when the store already holds the row `sql` (a SELECT on the row's key) finds.
bool holds(Database& db, const std::string& sql, const std::function<void(Statement&)>& bind) {
  Statement& st = db.cached(sql);
  bind(st);
  const bool found = st.step();
  st.reset();
  return found;
}

// Copies the rows of one table the store lacks: `read` lists the file's, `key` asks the
// store for one, `insert` writes one. Returns how many it copied.
template <class Row>
int64_t copy_new(Database& from, Database& to, int64_t run, const std::string& select,
                 Row (*read)(const Statement&, int), const std::string& key,
                 const std::function<void(Statement&, const Row&)>& bind_key,
                 void (*insert)(Database&, int64_t, const Row&), std::vector<Row>* copied = nullptr) {
  int64_t n = 0;
  Statement st(from, select);
  st.bind(1, run);
  while (st.step()) {
    const Row row = read(st, 0);
    if (holds(to, key, [&](Statement& k) { k.bind(1, run); bind_key(k, row); })) continue;
    insert(to, run, row);
    if (copied) copied->push_back(row);
    ++n;
  }
  return n;
}

ValidRow read_valid(const Statement& st, int i) { return {st.int64(i), st.real(i + 1), st.real(i + 2)}; }

void insert_event_row(Database& db, int64_t run, const Event& e) { insert_event(db, run, e); }

std::string select(const char* columns, const char* table, const char* order) {
  return std::string("SELECT ") + columns + " FROM " + table + " WHERE run_id = ? ORDER BY " + order;
}

}  // namespace

std::string save_recovery(const RecoveryTarget& target, const Batch& batch, const std::string& why) {
  const std::string name = fs::path(target.store).filename().string() + ".run-" +
                           std::to_string(target.run_id) + "-" + std::to_string(getpid()) + ".recover";
  std::vector<fs::path> places = {fs::path(target.store).parent_path()};
  std::error_code ec;
  const fs::path temp = fs::temp_directory_path(ec);
  if (!ec && temp != places.front()) places.push_back(temp);
  std::string failures;
  for (const fs::path& place : places) {
    const std::string file = (place / name).string();
    bool created = false;
    try {
      ::close(create_private_file(file));  // O_EXCL, 0600: never another's file, nor through a link
      created = true;
      write_recovery_file(file, target, batch, why);
      return file;
    } catch (const std::exception& e) {
      if (created) {
        fs::remove(file, ec);
        fs::remove(file + "-journal", ec);
      }
      failures += (failures.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  fail("store: the rows " + target.store + " could not take are lost: no recovery file could be written (" +
       failures + ")");
}

RecoveryLoad load_recovery(const std::string& file, const std::string& store) {
  const std::unique_ptr<Database> rec = open_recovery(file);
  const Header h = read_header(*rec, file);
  RecoveryLoad load;
  load.store = existing_store(store.empty() ? h.store : store, file);
  load.run_name = h.run_name;
  const std::unique_ptr<Database> db = open_store(load.store, Access::ReadWrite);
  Database& to = *db;
  Transaction tx(to);

  Statement run(to, "SELECT id, created_at, status FROM runs WHERE name = ?");
  run.bind(1, h.run_name);
  if (!run.step())
    fail("recover: " + load.store + " has no run named '" + h.run_name + "' (was it removed?); nothing loaded");
  if (run.int64(0) != h.run_id || run.real(1) != h.run_created_at)
    fail("recover: run '" + h.run_name + "' in " + load.store + " is another run than the one " + file +
         " holds rows of (created " + local_time_text(run.real(1), kSecondFormat) + ", that one " +
         local_time_text(h.run_created_at, kSecondFormat) +
         "); nothing loaded");
  load.run_id = run.int64(0);
  const RunStatus stored = parse_run_status(run.text(2));
  run.reset();
  const int64_t id = load.run_id;
  Database& from = *rec;

  std::vector<MetricRow> metrics;
  load.metric_rows = copy_new<MetricRow>(
      from, to, id, select(metric_column_list().c_str(), "metrics", "step, rank"), read_metric,
      "SELECT 1 FROM metrics WHERE run_id = ? AND step = ? AND rank = ?",
      [](Statement& k, const MetricRow& r) { k.bind(2, r.step).bind(3, r.rank); }, insert_metric, &metrics);
  BlockUpdate blocks;
  blocks.add(metrics);
  blocks.write(to, id);
  SpreadUpdate spread;
  spread.add(metrics);
  spread.write(to, id);
  load.other_rows += copy_new<SystemRow>(
      from, to, id, select(kSystemColumns, "system_metrics", "rank, time"), read_system,
      "SELECT 1 FROM system_metrics WHERE run_id = ? AND rank = ? AND time = ?",
      [](Statement& k, const SystemRow& r) { k.bind(2, r.rank).bind(3, r.time); }, insert_system);
  load.other_rows += copy_new<ValidRow>(
      from, to, id, select("step, time, loss", "valid_metrics", "step"), read_valid,
      "SELECT 1 FROM valid_metrics WHERE run_id = ? AND step = ?",
      [](Statement& k, const ValidRow& r) { k.bind(2, r.step); }, insert_valid);
  load.other_rows += copy_new<Sample>(
      from, to, id, select(kSampleColumns, "samples", "step, slot"), read_sample,
      "SELECT 1 FROM samples WHERE run_id = ? AND step = ? AND slot = ?",
      [](Statement& k, const Sample& s) { k.bind(2, s.step).bind(3, int64_t{s.slot}); }, insert_sample);
  load.other_rows += copy_new<ExpertLoad>(
      from, to, id, select(kExpertLoadColumns, "expert_loads", "step, layer"), read_expert_load,
      "SELECT 1 FROM expert_loads WHERE run_id = ? AND layer = ? AND step = ?",
      [](Statement& k, const ExpertLoad& l) { k.bind(2, l.layer).bind(3, l.step); }, insert_expert_load);
  load.other_rows += copy_new<Checkpoint>(
      from, to, id, select(kCheckpointColumns, "checkpoints", "step"), read_checkpoint,
      "SELECT 1 FROM checkpoints WHERE run_id = ? AND step = ?",
      [](Statement& k, const Checkpoint& c) { k.bind(2, c.step); }, insert_checkpoint);
  // Events have no key of their own: one the store holds at the same time with the same
  // step, kind and text is the same event.
  load.events = copy_new<Event>(
      from, to, id, select(kEventColumns, "events", "id"), read_event,
      "SELECT 1 FROM events WHERE run_id = ? AND time = ? AND step IS ? AND kind = ? AND message = ?",
      [](Statement& k, const Event& e) { k.bind(2, e.time).bind(3, e.step).bind(4, e.kind).bind(5, e.message); },
      insert_event_row);

  // The final status, while nothing has recorded the run since (a live status is what the
  // process that died left; a resumed run that ended has its own).
  if (h.status_changed && is_live(stored)) {
    Statement last(from, "SELECT status, ended_at, error FROM runs WHERE id = ?");
    last.bind(1, id);
    if (last.step() && parse_run_status(last.text(0)) != stored) {
      load.status = last.text(0);
      Statement set(to, "UPDATE runs SET status = ?1, ended_at = ?2, error = ?3, "
                        "pid = CASE WHEN ?2 IS NULL THEN pid END WHERE id = ?4");
      set.bind(1, load.status).bind(2, last.opt_real(1)).bind(4, id);
      if (!last.is_null(2)) set.bind(3, last.text(2));
      set.run();
    }
  }
  if (!load.nothing_new()) {
    std::string message = "recovered " + std::to_string(load.metric_rows) + " metric rows, " +
                          std::to_string(load.other_rows) + " other rows and " + std::to_string(load.events) +
                          " events from " + fs::absolute(file).string();
    if (!load.status.empty()) message += "; status " + load.status;
    insert_event(to, id, Event{0, unix_now(), std::nullopt, std::string(event_kind::kRecovered), message});
  }
  load.last_step = to.query_int("SELECT max(step) FROM metrics WHERE run_id = " + std::to_string(id));
  tx.commit();
  return load;
}

}  // namespace kiln::store
