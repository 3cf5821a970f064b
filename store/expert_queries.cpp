#include "store/expert_queries.h"

#include <algorithm>
#include <string>

#include "store/rows.h"

namespace kiln::store {
namespace {

int64_t sql_limit(size_t n) { return static_cast<int64_t>(std::min<size_t>(n, INT64_MAX)); }

// One layer's rows in [from, to], at most max_steps of them (ExpertRange says which).
void append_layer(Database& db, int64_t run_id, int layer, const ExpertRange& range, std::vector<ExpertLoad>& out) {
  if (range.max_steps == 0) return;
  static const std::string all_sql = std::string("SELECT ") + kExpertLoadColumns +
                                     " FROM expert_loads WHERE run_id = ? AND layer = ? AND step >= ? AND "
                                     "step <= ? ORDER BY step LIMIT ?";
  std::vector<ExpertLoad> rows;
  {
    Statement& st = db.cached(all_sql);
    // One more than fits tells a range that must be downsampled from one that need not.
    st.bind_all(run_id, layer, range.from, range.to, sql_limit(std::min<size_t>(range.max_steps, INT64_MAX - 1) + 1));
    while (st.step()) rows.push_back(read_expert_load(st));
    st.reset();
  }
  if (rows.size() <= range.max_steps) {
    out.insert(out.end(), rows.begin(), rows.end());
    return;
  }
  // More than max_steps: the range's ends, then one seek per evenly spaced step between.
  Statement& last = db.cached(
      "SELECT max(step) FROM expert_loads WHERE run_id = ? AND layer = ? AND step >= ? AND step <= ?");
  last.bind_all(run_id, layer, range.from, range.to);
  last.step();
  const int64_t hi = last.int64(0);
  last.reset();
  const int64_t lo = rows.front().step;
  out.push_back(std::move(rows.front()));
  if (range.max_steps == 1) return;
  static const std::string seek_sql = std::string("SELECT ") + kExpertLoadColumns +
                                      " FROM expert_loads WHERE run_id = ? AND layer = ? AND step >= ? AND "
                                      "step <= ? ORDER BY step LIMIT 1";
  Statement& seek = db.cached(seek_sql);
  int64_t next = lo + 1;
  const double span = static_cast<double>(hi) - static_cast<double>(lo);
  for (size_t i = 1; i < range.max_steps && next <= hi; ++i) {
    const double mark = static_cast<double>(lo) + span * static_cast<double>(i) / static_cast<double>(range.max_steps - 1);
    const int64_t at = std::max(next, std::min(hi, static_cast<int64_t>(mark)));
    seek.bind_all(run_id, layer, at, hi);
    if (seek.step()) {
      out.push_back(read_expert_load(seek));
      next = out.back().step + 1;
    }
    seek.reset();
  }
}

}  // namespace

std::vector<int> expert_layers(Database& db, int64_t run_id) {
  // Each layer is one seek of the key for the next one above it (a skip scan), so a run of
  // many steps costs as much as one of few.
  Statement& st = db.cached(
      "WITH RECURSIVE layers(layer) AS ("
      " SELECT min(layer) FROM expert_loads WHERE run_id = ?1"
      " UNION ALL SELECT (SELECT min(layer) FROM expert_loads WHERE run_id = ?1 AND layer > layers.layer)"
      " FROM layers WHERE layers.layer IS NOT NULL) "
      "SELECT layer FROM layers WHERE layer IS NOT NULL LIMIT ?2");
  st.bind_all(run_id, static_cast<int64_t>(kMaxExpertLayers));
  std::vector<int> layers;
  while (st.step()) layers.push_back(static_cast<int>(st.int64(0)));
  return layers;
}

std::optional<int64_t> last_expert_step(Database& db, int64_t run_id) {
  Statement& st = db.cached("SELECT max(step) FROM expert_loads WHERE run_id = ?");
  st.bind(1, run_id);
  st.step();
  const std::optional<int64_t> step = st.opt_int64(0);
  st.reset();
  return step;
}

std::vector<ExpertLoad> list_expert_loads(Database& db, int64_t run_id, const ExpertRange& range) {
  ReadSnapshot snapshot(db);
  std::vector<ExpertLoad> out;
  if (range.from > range.to) return out;
  const std::vector<int> layers = range.layer ? std::vector<int>{*range.layer} : expert_layers(db, run_id);
  for (int layer : layers) append_layer(db, run_id, layer, range, out);
  return out;
}

std::vector<ExpertLoad> latest_expert_loads(Database& db, int64_t run_id) {
  ReadSnapshot snapshot(db);
  static const std::string sql = std::string("SELECT ") + kExpertLoadColumns +
                                 " FROM expert_loads WHERE run_id = ? AND layer = ? ORDER BY step DESC LIMIT 1";
  std::vector<ExpertLoad> out;
  for (int layer : expert_layers(db, run_id)) {
    Statement& st = db.cached(sql);
    st.bind_all(run_id, layer);
    if (st.step()) out.push_back(read_expert_load(st));
    st.reset();
  }
  return out;
}

std::vector<ExpertLoad> expert_loads_after(Database& db, int64_t run_id, int64_t after_step, size_t max_rows) {
  // Newest first along the index by step; the oldest step taken may be cut short by the
  // limit, so when the limit is reached it goes, unless it is the only one.
  static const std::string sql = std::string("SELECT ") + kExpertLoadColumns +
                                 " FROM expert_loads WHERE run_id = ? AND step > ? ORDER BY step DESC, "
                                 "layer DESC LIMIT ?";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, after_step, sql_limit(max_rows));
  std::vector<ExpertLoad> rows;
  while (st.step()) rows.push_back(read_expert_load(st));
  st.reset();
  if (!rows.empty() && rows.size() == max_rows && rows.front().step != rows.back().step) {
    const int64_t cut = rows.back().step;
    while (rows.back().step == cut) rows.pop_back();
  }
  std::reverse(rows.begin(), rows.end());
  return rows;
}

void for_each_expert_load(Database& db, int64_t run_id, const std::function<void(const ExpertLoad&)>& fn) {
  static const std::string sql = std::string("SELECT ") + kExpertLoadColumns +
                                 " FROM expert_loads WHERE run_id = ? ORDER BY step, layer";
  // Its own statement, not the cache's: fn may run other cached queries meanwhile.
  Statement st(db, sql);
  st.bind(1, run_id);
  while (st.step()) fn(read_expert_load(st));
}

}  // namespace kiln::store
