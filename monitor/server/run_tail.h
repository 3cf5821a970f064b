// Follows one run in the store: each poll returns what was committed since the last one, as
// the JSON messages the live WebSocket sends (docs/dashboard.md):
//   {"type": "metrics", "rows": [...],   new metric rows: every rank's of each new step of up
//    "spread": {...}}                    to kSpreadAbove ranks, rank 0's alone of a wider one;
//                                        then "spread" holds, per per-rank field, those wide
//                                        steps' spread across ranks from the store's
//                                        metric_spread rows (spread_json.h: the REST API's
//                                        shape, a point a step), so a message of a 4,096-rank
//                                        step is a few kB, not 2 MB
//   {"type": "valid", "rows": [...]}     new validation rows
//   {"type": "samples", "rows": [...]}   text generated at new validation steps
//   {"type": "experts", "rows": [...]}   new steps' expert loads, every MoE layer of each
//   {"type": "system", "rows": [...]}    new system readings
//   {"type": "events", "events": [...]}  new events
//   {"type": "status", "run": {...}}     the run's status changed (paused, completed, lost...)
//   {"type": "rewind", "rewind": {...}}  the run went back past a loss spike: the rows after
//                                        its step were forgotten, and those that follow this
//                                        message were trained again in their place
// Every read is a prepared statement of the store's queries, inside one snapshot. The run's
// record goes out as the API hands it out (run_address.h): its id an address, with its store.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "monitor/server/served_stores.h"
#include "store/database.h"
#include "store/types.h"

namespace kiln::monitor {

class RunTail {
 public:
  // Starts at the run's present state: the first poll returns only what comes after it. `db`
  // is a connection to `store`, which holds the run; so must be each poll's.
  RunTail(store::Database& db, const ServedStore& store, int64_t run_id);

  std::vector<std::string> poll(store::Database& db);

  // {"type": "hello", "run": {...}, "last_step": N, ...}: where a new subscriber's stream
  // starts, so it loads the history up to there over the REST API and appends what follows.
  std::string hello() const;

 private:
  // A rewind forgot the run's rows past `step`: what comes after is new to the stream.
  void back_to(int64_t step);

  // The record as the API hands it out.
  nlohmann::json record_json(const store::RunRecord& run) const;

  const ServedStore& store_;
  int64_t run_id_;
  nlohmann::json run_;  // the record as last sent
  std::optional<int64_t> last_step_;
  std::optional<int64_t> last_valid_step_;
  std::optional<int64_t> last_sample_step_;
  std::optional<int64_t> last_expert_step_;
  double last_system_time_ = 0;
  int64_t last_event_id_ = 0;
  int64_t rewinds_ = 0;  // the run's rewinds, all sent or there before the stream began
};

}  // namespace kiln::monitor
