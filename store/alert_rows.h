// The alerts a run's rules fired (docs/alerts.md): one row each, with an `alert` event, so
// the charts, the terminal UI and `kiln runs show` that read events show them too; and the
// counts the runs table puts in a badge.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// The longest alert message kept; a longer one is cut (the rule's text is the trainer's).
inline constexpr size_t kMaxAlertMessageBytes = 1024;

// Inserts the alert and its event in the caller's transaction; returns the alert's id.
int64_t insert_alert(Database& db, int64_t run_id, const Alert& alert);
// A run's alerts, oldest first; with limit > 0 the newest `limit` of them.
std::vector<Alert> list_alerts(Database& db, int64_t run_id, int64_t limit = 0);
// How many alerts each run that has any fired, by run id.
std::map<int64_t, int64_t> alert_counts(Database& db);
// How many alerts each rule fired in a run, by rule (Prometheus' kiln_alerts_total).
std::map<std::string, int64_t> alert_counts_by_rule(Database& db, int64_t run_id);

}  // namespace kiln::store
