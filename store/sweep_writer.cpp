#include "store/sweep_writer.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/run_names.h"
#include "store/error.h"
#include "store/process_gone.h"
#include "store/schema.h"
#include "store/sweep_queries.h"
#include "store/types.h"
#include "store/user_text.h"

namespace kiln::store {
namespace {

void require_json(const std::string& text, const std::string& what) {
  require_utf8(text, what);
  if (!nlohmann::json::accept(text)) fail("store: " + what + " is not valid JSON");
}

}  // namespace

int64_t create_sweep(Database& db, const NewSweep& sweep) {
  check_run_name(sweep.name);
  require_json(sweep.spec_json, "the sweep's spec");
  require_utf8(sweep.command_line, "the command line");
  require_utf8(sweep.workdir, "the working folder");
  if (sweep.points.empty() || static_cast<int64_t>(sweep.points.size()) > kMaxSweepPoints)
    fail("store: a sweep has 1 to " + std::to_string(kMaxSweepPoints) + " points, not " +
         std::to_string(sweep.points.size()));
  for (const std::string& params : sweep.points) require_json(params, "a point's parameters");

  Transaction tx(db);
  Statement& existing = db.cached("SELECT id FROM sweeps WHERE name = ?");
  existing.bind(1, sweep.name);
  if (existing.step()) {
    const int64_t id = existing.int64(0);
    existing.reset();
    fail("store: a sweep named '" + sweep.name + "' already exists in " + db.path() + " (id " + std::to_string(id) +
         "); choose another --name, or continue it with --resume " + sweep.name);
  }
  const double now = unix_now();
  Statement& insert = db.cached(
      "INSERT INTO sweeps (name, created_at, spec_json, command_line, workdir, host, pid, heartbeat_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind_all(sweep.name, now, sweep.spec_json, redact_command_line(sweep.command_line), sweep.workdir,
                  sweep.host, sweep.pid, now);
  insert.run();
  const int64_t id = db.last_insert_rowid();
  Statement& point = db.cached("INSERT INTO sweep_points (sweep_id, point, params_json) VALUES (?, ?, ?)");
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    point.reset();
    point.bind_all(id, static_cast<int64_t>(i), sweep.points[i]);
    point.run();
  }
  tx.commit();
  return id;
}

void set_point_run(Database& db, int64_t sweep_id, int64_t point, const std::string& run_name) {
  Transaction tx(db);
  Statement& st = db.cached("UPDATE sweep_points SET run_name = ? WHERE sweep_id = ? AND point = ?");
  st.bind_all(run_name, sweep_id, point);
  st.run();
  if (db.changes() != 1)
    fail("store: sweep " + std::to_string(sweep_id) + " has no point " + std::to_string(point));
  tx.commit();
}

ClaimedSweep claim_sweep(Database& db, int64_t sweep_id, const std::string& host, int64_t pid,
                         double stale_after_s) {
  Transaction tx(db);
  Statement& st = db.cached(
      "SELECT name, spec_json, workdir, host, pid, heartbeat_at, ended_at, status FROM sweeps WHERE id = ?");
  st.bind(1, sweep_id);
  if (!st.step()) fail("store: no sweep with id " + std::to_string(sweep_id) + " in " + db.path());
  ClaimedSweep claimed{st.text(0), st.text(1), st.text(2), {}, parse_sweep_status(st.text(7))};
  if (claimed.ended_as == SweepStatus::Live) claimed.ended_as = SweepStatus::Interrupted;
  const std::string recorded_host = st.text(3);
  const std::optional<int64_t> recorded_pid = st.opt_int64(4);
  const std::optional<double> heartbeat = st.opt_real(5);
  const bool ended = !st.is_null(6);
  st.reset();
  const double age = heartbeat ? unix_now() - *heartbeat : stale_after_s;
  if (!ended && age < stale_after_s && !process_gone(recorded_host, recorded_pid, host))
    fail("store: sweep '" + claimed.name + "' is still running (pid " +
         (recorded_pid ? std::to_string(*recorded_pid) : std::string("?")) + " on " + recorded_host +
         ", last heartbeat " + std::to_string(static_cast<int64_t>(std::max(0.0, age))) +
         " s ago); stop it first, or wait for it to end");

  Statement& points = db.cached(
      "SELECT point, params_json, coalesce(run_name, '') FROM sweep_points WHERE sweep_id = ? ORDER BY point");
  points.bind(1, sweep_id);
  while (points.step()) claimed.points.push_back({points.int64(0), points.text(1), points.text(2)});
  Statement& update = db.cached(
      "UPDATE sweeps SET host = ?, pid = ?, heartbeat_at = ?, ended_at = NULL, status = 'live' WHERE id = ?");
  update.bind_all(host, pid, unix_now(), sweep_id);
  update.run();
  tx.commit();
  return claimed;
}

void end_sweep(Database& db, int64_t sweep_id, SweepStatus how) {
  KILN_CHECK(how != SweepStatus::Live, "end_sweep: a sweep ends as ended or interrupted");
  Transaction tx(db);
  Statement& st =
      db.cached("UPDATE sweeps SET ended_at = ?1, heartbeat_at = ?1, pid = NULL, status = ?2 WHERE id = ?3");
  st.bind_all(unix_now(), std::string(to_string(how)), sweep_id);
  st.run();
  tx.commit();
}

SweepHeartbeat::SweepHeartbeat(const std::string& path, int64_t sweep_id, std::chrono::milliseconds interval)
    : db_(open_store(path, Access::ReadWrite)), sweep_id_(sweep_id), interval_(interval) {
  thread_ = std::thread([this] { beat_until_stopped(); });
}

SweepHeartbeat::~SweepHeartbeat() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SweepHeartbeat::beat_until_stopped() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    // A busy or full disk misses one beat; the next one tries again. The sweep is only shown
    // as stale if the disk stays unwritable for the whole stale period.
    try {
      Statement& st = db_->cached("UPDATE sweeps SET heartbeat_at = ? WHERE id = ? AND ended_at IS NULL");
      st.bind_all(unix_now(), sweep_id_);
      st.run();
    } catch (const Error&) {
    }
  }
}

}  // namespace kiln::store
