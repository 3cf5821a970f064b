#include "store/run_queries.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/check.h"

#include "store/error.h"
#include "store/name_lookup.h"
#include "store/process_gone.h"
#include "store/rows.h"
#include "store/user_text.h"

namespace kiln::store {
namespace {

// Every run column, with the effective status first: ?1 is the heartbeat cutoff. {config} is
// the config's column, or '' for a list that leaves it out.
constexpr const char* kRunSelect = R"sql(
  SELECT id, name,
         CASE WHEN status IN ('running', 'paused')
                   AND coalesce(heartbeat_at, started_at, created_at) < ?1
              THEN 'lost' ELSE status END AS effective,
         status, {config}, layout, backend, device, host, command_line, created_at,
         started_at, ended_at, heartbeat_at, tags, notes, coalesce(error, ''),
         (SELECT max(step) FROM metrics WHERE metrics.run_id = runs.id), pid,
         planned_step_s, planned_memory_bytes, workdir, world_size, sweep_id, sweep_point,
         parent_id, parent_step, coalesce(launch, ''), step_seconds, counted_seconds,
         attempt_started_at
  FROM runs)sql";

std::string run_select(const std::string& config_column) {
  std::string sql = kRunSelect;
  sql.replace(sql.find("{config}"), 8, config_column);
  return sql;
}

std::vector<std::string> parse_tags(const std::string& text) {
  const auto json = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> tags;
  if (!json.is_array()) return tags;
  for (const auto& t : json)
    if (t.is_string()) tags.push_back(t.get<std::string>());
  return tags;
}

RunRecord read_run(const Statement& st) {
  RunRecord r;
  r.id = st.int64(0);
  r.name = st.text(1);
  r.status = parse_run_status(st.text(2));
  r.stored_status = parse_run_status(st.text(3));
  r.config_json = st.text(4);
  r.layout = st.text(5);
  r.backend = st.text(6);
  r.device = st.text(7);
  r.host = st.text(8);
  r.command_line = st.text(9);
  r.created_at = st.real(10);
  r.started_at = st.opt_real(11);
  r.ended_at = st.opt_real(12);
  r.heartbeat_at = st.opt_real(13);
  r.tags = parse_tags(st.text(14));
  r.notes = st.text(15);
  r.error = st.text(16);
  r.last_step = st.opt_int64(17);
  r.pid = st.opt_int64(18);
  r.planned_step_s = st.opt_real(19).value_or(kNoValue);
  r.planned_memory_bytes = st.opt_int64(20);
  r.workdir = st.text(21);
  r.world_size = st.opt_int64(22);
  r.sweep_id = st.opt_int64(23);
  r.sweep_point = st.opt_int64(24);
  r.parent_id = st.opt_int64(25);
  r.parent_step = st.opt_int64(26);
  r.launch_json = st.text(27);
  r.step_seconds = st.opt_real(28);
  r.counted_seconds = st.real(29);
  r.attempt_started_at = st.opt_real(30);
  return r;
}



void write_tags(Database& db, int64_t run_id, const std::vector<std::string>& tags) {
  Statement& st = db.cached("UPDATE runs SET tags = ? WHERE id = ?");
  st.bind_all(nlohmann::json(tags).dump(), run_id);
  st.run();
}

}  // namespace

ConfigMatch parse_config_match(std::string_view text) {
  const size_t eq = text.find('=');
  const std::string_view key = text.substr(0, eq == std::string_view::npos ? 0 : eq);
  bool words = !key.empty() && key.front() != '.' && key.back() != '.' && key.find("..") == std::string_view::npos;
  for (const char c : key) words = words && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
  if (!words)
    fail("runs: '" + std::string(text) + "' is not KEY=VALUE with a dotted config key (e.g. train.lr=0.001)");
  return {std::string(key), std::string(text.substr(eq + 1))};
}

namespace {

// Binds a ConfigMatch's value as what json_extract gives back for it: a number, a boolean's
// 1 or 0, or text.
void bind_config_value(Statement& st, int index, const std::string& value) {
  if (value == "true" || value == "false") {
    st.bind(index, int64_t{value == "true"});
    return;
  }
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  if (!value.empty() && end == value.c_str() + value.size() && std::isfinite(number)) st.bind(index, number);
  else st.bind(index, value);
}

}  // namespace

std::vector<RunRecord> list_runs(Database& db, const RunFilter& filter, double stale_after_s) {
  // The filters name the table's columns (runs.config_json even where the answer leaves it
  // out) and the effective status by its alias, which SQLite resolves in WHERE.
  std::string sql = run_select(filter.with_config ? "config_json" : "'' AS config_json") + " WHERE 1";
  int index = 1;
  if (filter.status) sql += " AND effective = ?" + std::to_string(++index);
  if (!filter.tag.empty())
    sql += " AND EXISTS (SELECT 1 FROM json_each(runs.tags) WHERE json_each.value = ?" +
           std::to_string(++index) + ")";
  if (!filter.name_contains.empty())
    sql += " AND instr(lower(name), lower(?" + std::to_string(++index) + ")) > 0";
  for (size_t i = 0; i < filter.words.size(); ++i) {
    const std::string word = "lower(?" + std::to_string(++index) + ")";
    sql += " AND (instr(lower(name), " + word + ") > 0 OR EXISTS (SELECT 1 FROM json_each(runs.tags) WHERE instr(lower(json_each.value), " +
           word + ") > 0))";
  }
  if (filter.since) sql += " AND created_at >= ?" + std::to_string(++index);
  if (filter.sweep_id) sql += " AND sweep_id = ?" + std::to_string(++index);
  for (size_t i = 0; i < filter.config.size(); ++i, index += 2)
    sql += " AND json_extract(runs.config_json, ?" + std::to_string(index + 1) + ") = ?" + std::to_string(index + 2);
  sql += " ORDER BY created_at DESC, id DESC";
  if (filter.limit > 0) sql += " LIMIT " + std::to_string(filter.limit);

  Statement& st = db.cached(sql);
  index = 1;
  st.bind(index, unix_now() - stale_after_s);
  if (filter.status) st.bind(++index, to_string(*filter.status));
  if (!filter.tag.empty()) st.bind(++index, filter.tag);
  if (!filter.name_contains.empty()) st.bind(++index, filter.name_contains);
  for (const std::string& word : filter.words) st.bind(++index, word);
  if (filter.since) st.bind(++index, *filter.since);
  if (filter.sweep_id) st.bind(++index, *filter.sweep_id);
  for (const ConfigMatch& m : filter.config) {
    st.bind(++index, "$." + m.key);
    bind_config_value(st, ++index, m.value);
  }
  std::vector<RunRecord> runs;
  while (st.step()) runs.push_back(read_run(st));
  return runs;
}

RunRecord get_run(Database& db, int64_t run_id, double stale_after_s) {
  static const std::string sql = run_select("config_json") + " WHERE id = ?2";
  Statement& st = db.cached(sql);
  st.bind(1, unix_now() - stale_after_s).bind(2, run_id);
  if (!st.step()) fail("store: no run with id " + std::to_string(run_id) + " in " + db.path());
  RunRecord run = read_run(st);
  st.reset();
  return run;
}

bool recorder_gone(const RunRecord& run, const std::string& this_host) {
  return process_gone(run.host, run.pid, this_host);
}

std::optional<int64_t> find_run_named(Database& db, std::string_view name) {
  return row_named(db, name, kNamedRuns);
}

int64_t resolve_run(Database& db, std::string_view run) {
  return resolve_named(db, run, kNamedRuns);
}

std::vector<Event> list_events(Database& db, int64_t run_id, int64_t after_id) {
  static const std::string sql = std::string("SELECT ") + kEventColumns +
                                 " FROM events WHERE run_id = ? AND id > ? ORDER BY id";
  Statement& st = db.cached(sql);
  st.bind(1, run_id).bind(2, after_id);
  std::vector<Event> events;
  while (st.step()) events.push_back(read_event(st));
  return events;
}

std::vector<Checkpoint> list_checkpoints(Database& db, int64_t run_id) {
  static const std::string sql = std::string("SELECT ") + kCheckpointColumns +
                                 " FROM checkpoints WHERE run_id = ? ORDER BY step";
  Statement& st = db.cached(sql);
  st.bind(1, run_id);
  std::vector<Checkpoint> checkpoints;
  while (st.step()) checkpoints.push_back(read_checkpoint(st));
  return checkpoints;
}

std::vector<ValidRow> list_valid(Database& db, int64_t run_id, int64_t after_step) {
  Statement& st = db.cached(
      "SELECT step, time, loss FROM valid_metrics WHERE run_id = ? AND step > ? ORDER BY step");
  st.bind_all(run_id, after_step);
  std::vector<ValidRow> rows;
  while (st.step()) rows.push_back(ValidRow{st.int64(0), st.real(1), st.real(2)});
  return rows;
}

std::vector<SystemRow> list_system(Database& db, int64_t run_id, double since) {
  static const std::string sql = std::string("SELECT ") + kSystemColumns +
                                 " FROM system_metrics WHERE run_id = ? AND time >= ? "
                                 "ORDER BY time, rank";
  Statement& st = db.cached(sql);
  st.bind(1, run_id).bind(2, since);
  std::vector<SystemRow> rows;
  while (st.step()) rows.push_back(read_system(st));
  return rows;
}

void add_tags(Database& db, int64_t run_id, const std::vector<std::string>& tags) {
  Transaction tx(db);
  std::vector<std::string> current = get_run(db, run_id).tags;
  for (const auto& tag : tags) {
    if (tag.empty()) fail("store: a tag cannot be empty");
    require_utf8(tag, "the tag");
    if (std::find(current.begin(), current.end(), tag) == current.end()) current.push_back(tag);
  }
  write_tags(db, run_id, current);
  tx.commit();
}

void remove_tags(Database& db, int64_t run_id, const std::vector<std::string>& tags) {
  Transaction tx(db);
  std::vector<std::string> current = get_run(db, run_id).tags;
  std::erase_if(current, [&](const std::string& t) {
    return std::find(tags.begin(), tags.end(), t) != tags.end();
  });
  write_tags(db, run_id, current);
  tx.commit();
}

void set_notes(Database& db, int64_t run_id, const std::string& notes) {
  require_utf8(notes, "the notes");
  Transaction tx(db);
  get_run(db, run_id);  // an unknown id fails with the usual message
  Statement& st = db.cached("UPDATE runs SET notes = ? WHERE id = ?");
  st.bind_all(notes, run_id);
  st.run();
  tx.commit();
}

void remove_run(Database& db, int64_t run_id, bool force, double stale_after_s) {
  Transaction tx(db);
  const RunRecord run = get_run(db, run_id, stale_after_s);
  if (!force && (run.status == RunStatus::Running || run.status == RunStatus::Paused))
    fail("store: run '" + run.name + "' is " + std::string(to_string(run.status)) +
         "; stop it first, or remove it anyway with force");
  // ON DELETE CASCADE removes its metrics, events, checkpoints and commands.
  Statement& st = db.cached("DELETE FROM runs WHERE id = ?");
  st.bind(1, run_id);
  st.run();
  tx.commit();
}

}  // namespace kiln::store
