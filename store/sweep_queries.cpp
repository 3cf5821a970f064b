#include "store/sweep_queries.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <nlohmann/json.hpp>

#include "store/error.h"
#include "store/name_lookup.h"

namespace kiln::store {
namespace {

// A point's run's status as runs list reads it (?1 is the heartbeat cutoff); NULL when the
// point has no recorded run.
const std::string kEffectiveStatus =
    "CASE WHEN r.status IN ('running', 'paused') "
    "AND coalesce(r.heartbeat_at, r.started_at, r.created_at) < ?1 THEN 'lost' ELSE r.status END";

// Every sweep column with its points' progress, and its state (a live sweep whose heartbeat is
// older than the cutoff is interrupted); ?1 is the heartbeat cutoff, ?2 the limit
// (-1: none) and ?3 a sweep id or NULL for all of them.
const std::string kSweepSelect =
    "WITH chosen AS (SELECT id FROM sweeps WHERE ?3 IS NULL OR id = ?3 "
    "                ORDER BY created_at DESC, id DESC LIMIT ?2), "
    "point_runs AS (SELECT p.sweep_id, p.run_name, " + kEffectiveStatus + " AS effective "
    "               FROM sweep_points p LEFT JOIN runs r ON r.name = p.run_name "
    "               WHERE p.sweep_id IN (SELECT id FROM chosen)), "
    "progress AS (SELECT sweep_id, count(*) AS points, count(run_name) AS launched, "
    "                    sum(effective = 'completed') AS completed, "
    "                    sum(effective IN ('running', 'paused')) AS running, "
    "                    sum(effective IN ('failed', 'lost')) AS failed "
    "             FROM point_runs GROUP BY sweep_id) "
    "SELECT s.id, s.name, s.created_at, s.heartbeat_at, s.ended_at, "
    "       CASE WHEN s.status = 'live' AND coalesce(s.heartbeat_at, s.created_at) < ?1 "
    "            THEN 'interrupted' ELSE s.status END, "
    "       s.spec_json, s.command_line, s.workdir, s.host, coalesce(g.points, 0), "
    "       coalesce(g.launched, 0), coalesce(g.completed, 0), coalesce(g.running, 0), "
    "       coalesce(g.failed, 0) "
    "FROM sweeps s LEFT JOIN progress g ON g.sweep_id = s.id "
    "WHERE s.id IN (SELECT id FROM chosen) ORDER BY s.created_at DESC, s.id DESC";

// One sweep's points with their runs' figures, in one statement: the per-step means over
// ranks of each point's run (its training loss and tokens/s), its last and lowest, and its
// last and lowest validation loss. ?1 is the heartbeat cutoff, ?2 the sweep, ?3 the limit.
// (SQLite takes a bare column beside max() from the row holding the maximum.)
const std::string kPointSelect =
    "WITH points AS (SELECT p.point, p.params_json, p.run_name, r.id AS run_id, " +
    kEffectiveStatus + " AS effective, json_extract(r.config_json, '$.train.steps') AS planned_steps "
    "                FROM sweep_points p LEFT JOIN runs r ON r.name = p.run_name "
    "                WHERE p.sweep_id = ?2 ORDER BY p.point LIMIT ?3), "
    "steps AS (SELECT run_id, step, avg(loss) AS loss, avg(tokens_per_s) AS tokens_per_s "
    "          FROM metrics WHERE run_id IN (SELECT run_id FROM points) GROUP BY run_id, step), "
    "last_step AS (SELECT run_id, max(step) AS step, loss, tokens_per_s FROM steps GROUP BY run_id), "
    "best_step AS (SELECT run_id, min(loss) AS loss FROM steps GROUP BY run_id), "
    "last_valid AS (SELECT run_id, max(step), loss FROM valid_metrics "
    "               WHERE run_id IN (SELECT run_id FROM points) GROUP BY run_id), "
    "best_valid AS (SELECT run_id, min(loss) AS loss FROM valid_metrics "
    "               WHERE run_id IN (SELECT run_id FROM points) GROUP BY run_id) "
    "SELECT p.point, p.params_json, p.run_id, coalesce(p.run_name, ''), "
    "       coalesce(p.effective, 'created'), l.step, l.loss, b.loss, lv.loss, bv.loss, "
    "       l.tokens_per_s, p.planned_steps "
    "FROM points p LEFT JOIN last_step l ON l.run_id = p.run_id "
    "LEFT JOIN best_step b ON b.run_id = p.run_id "
    "LEFT JOIN last_valid lv ON lv.run_id = p.run_id "
    "LEFT JOIN best_valid bv ON bv.run_id = p.run_id ORDER BY p.point";

SweepSummary read_sweep(const Statement& st) {
  SweepSummary s;
  s.id = st.int64(0);
  s.name = st.text(1);
  s.created_at = st.real(2);
  s.heartbeat_at = st.opt_real(3);
  s.ended_at = st.opt_real(4);
  s.status = parse_sweep_status(st.text(5));
  s.spec_json = st.text(6);
  s.command_line = st.text(7);
  s.workdir = st.text(8);
  s.host = st.text(9);
  s.points = st.int64(10);
  s.launched = st.int64(11);
  s.completed = st.int64(12);
  s.running = st.int64(13);
  s.failed = st.int64(14);
  return s;
}

SweepPointRow read_point(const Statement& st) {
  SweepPointRow p;
  p.point = st.int64(0);
  p.params_json = st.text(1);
  p.run_id = st.opt_int64(2);
  p.run_name = st.text(3);
  p.status = parse_run_status(st.text(4));
  p.last_step = st.opt_int64(5);
  p.final_loss = st.real(6);
  p.best_loss = st.real(7);
  p.final_valid_loss = st.real(8);
  p.best_valid_loss = st.real(9);
  p.tokens_per_s = st.real(10);
  p.steps = st.opt_int64(11);
  return p;
}

std::vector<SweepSummary> select_sweeps(Database& db, double stale_after_s, int64_t limit,
                                        std::optional<int64_t> sweep_id) {
  Statement& st = db.cached(kSweepSelect);
  st.bind_all(unix_now() - stale_after_s, limit > 0 ? limit : int64_t{-1}, sweep_id);
  std::vector<SweepSummary> sweeps;
  while (st.step()) sweeps.push_back(read_sweep(st));
  return sweeps;
}

// The keys of every point's parameters, in the order the first point holding each gives
// them (a JSON object's own order: ordered_json keeps it).
std::vector<std::string> swept_keys(const std::vector<SweepPointRow>& points) {
  std::vector<std::string> keys;
  for (const auto& point : points) {
    const auto params = nlohmann::ordered_json::parse(point.params_json, nullptr, false);
    if (!params.is_object()) continue;
    for (const auto& [key, value] : params.items())
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}



}  // namespace

std::string_view to_string(SweepStatus status) {
  switch (status) {
    case SweepStatus::Live: return "live";
    case SweepStatus::Ended: return "ended";
    case SweepStatus::Interrupted: return "interrupted";
  }
  return "?";
}

SweepStatus parse_sweep_status(std::string_view text) {
  for (SweepStatus s : {SweepStatus::Live, SweepStatus::Ended, SweepStatus::Interrupted})
    if (to_string(s) == text) return s;
  fail("store: unknown sweep status '" + std::string(text) + "' (valid: live, ended, interrupted)");
}

std::optional<BestPoint> best_point(const std::vector<SweepPointRow>& points) {
  const bool any_completed = std::any_of(points.begin(), points.end(), [](const SweepPointRow& p) {
    return p.status == RunStatus::Completed && !p.run_name.empty();
  });
  for (const auto& [metric, field] : {std::pair{"final_valid_loss", &SweepPointRow::final_valid_loss},
                                     std::pair{"final_loss", &SweepPointRow::final_loss}}) {
    std::optional<BestPoint> best;
    for (const auto& p : points) {
      if (any_completed && p.status != RunStatus::Completed) continue;
      if (!std::isnan(p.*field) && (!best || p.*field < best->value))
        best = BestPoint{p.point, metric, p.*field, !any_completed, p.last_step, p.steps};
    }
    if (best) return best;
  }
  return std::nullopt;
}

std::string best_label(const BestPoint& best) {
  if (!best.partial) return "best";
  const auto number = [](const std::optional<int64_t>& n) { return n ? std::to_string(*n) : std::string("?"); };
  return "best so far (partial: " + number(best.last_step) + "/" + number(best.steps) + " steps)";
}

std::vector<SweepSummary> list_sweeps(Database& db, int64_t limit, double stale_after_s) {
  ReadSnapshot snapshot(db);
  return select_sweeps(db, stale_after_s, limit, std::nullopt);
}

int64_t resolve_sweep(Database& db, std::string_view id_or_name) {
  return resolve_named(db, id_or_name, kNamedSweeps);
}

SweepDetails sweep_details(Database& db, int64_t sweep_id, double stale_after_s) {
  ReadSnapshot snapshot(db);
  SweepDetails d;
  auto sweeps = select_sweeps(db, stale_after_s, 1, sweep_id);
  if (sweeps.empty()) fail("store: no sweep with id " + std::to_string(sweep_id) + " in " + db.path());
  d.sweep = std::move(sweeps.front());
  Statement& st = db.cached(kPointSelect);
  st.bind_all(unix_now() - stale_after_s, sweep_id, kMaxSweepPoints);
  while (st.step()) d.points.push_back(read_point(st));
  d.parameters = swept_keys(d.points);
  return d;
}

}  // namespace kiln::store
