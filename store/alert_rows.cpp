#include "store/alert_rows.h"

#include "base/utf8.h"
#include "store/rows.h"

namespace kiln::store {

int64_t insert_alert(Database& db, int64_t run_id, const Alert& alert) {
  const double time = alert.time > 0 ? alert.time : unix_now();
  const std::string message = storable_text(alert.message, kMaxAlertMessageBytes);
  Statement& st = db.cached(
      "INSERT INTO alerts (run_id, time, step, rule, rank, value, threshold, message, action) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind_all(run_id, time, alert.step, alert.rule, alert.rank, alert.value, alert.threshold,
              message, alert.action);
  st.run();
  const int64_t id = db.last_insert_rowid();
  insert_event(db, run_id, Event{0, time, alert.step, std::string(event_kind::kAlert),
                                 alert.rule + ": " + message});
  return id;
}

std::vector<Alert> list_alerts(Database& db, int64_t run_id, int64_t limit) {
  // The newest `limit`, read newest first by the index and handed back oldest first.
  Statement& st = db.cached(
      "SELECT * FROM (SELECT id, time, step, rule, rank, value, threshold, message, action "
      "FROM alerts WHERE run_id = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id");
  st.bind_all(run_id, limit > 0 ? limit : int64_t{-1});
  std::vector<Alert> alerts;
  while (st.step()) {
    Alert a;
    a.id = st.int64(0);
    a.time = st.real(1);
    a.step = st.opt_int64(2);
    a.rule = st.text(3);
    if (const auto rank = st.opt_int64(4)) a.rank = static_cast<int>(*rank);
    a.value = st.real(5);
    a.threshold = st.real(6);
    a.message = st.text(7);
    a.action = st.text(8);
    alerts.push_back(std::move(a));
  }
  return alerts;
}

std::map<int64_t, int64_t> alert_counts(Database& db) {
  Statement& st = db.cached("SELECT run_id, count(*) FROM alerts GROUP BY run_id");
  std::map<int64_t, int64_t> counts;
  while (st.step()) counts[st.int64(0)] = st.int64(1);
  return counts;
}

std::map<std::string, int64_t> alert_counts_by_rule(Database& db, int64_t run_id) {
  Statement& st = db.cached("SELECT rule, count(*) FROM alerts WHERE run_id = ? GROUP BY rule");
  st.bind_all(run_id);
  std::map<std::string, int64_t> counts;
  while (st.step()) counts[st.text(0)] = st.int64(1);
  return counts;
}

}  // namespace kiln::store
