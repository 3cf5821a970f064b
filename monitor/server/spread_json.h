// The spread across ranks in GET /api/runs/{run}/metrics' answer for a wide run and in the
// live stream's metrics message of its new steps (store/metric_spread.h,
// docs/dashboard.md#api): columns, as a rank's series are, in one shape for both.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "store/database.h"
#include "store/metric_queries.h"
#include "store/run_details.h"

namespace kiln::monitor {

// The key's spread over the query's steps and points, or null when the key is not a per-rank
// field (loss, lr: the same on every rank, rank 0's series says it):
// {"step", "time", "ranks", "min", "mean", "max", "slowest_rank", "slowest"}, one entry a point.
nlohmann::json spread_json(store::Database& db, int64_t run_id, const store::SeriesQuery& query);

// Every per-rank field's spread over the wide steps in [first_step, last_step], a point a step:
// {"fwd_ms": {...as above...}, ...}, a field without a value in those steps left out. The live
// stream's metrics message carries it beside rank 0's rows of the steps.
nlohmann::json step_spreads_json(store::Database& db, int64_t run_id, int64_t first_step, int64_t last_step);

// A run's details as GET /api/runs/{run} and `kiln runs show --json` give them: the store's
// (store/json_rows.h), and for a wide latest step, beside rank 0's row in `latest_metrics`,
// the step's spread as `latest_spread` (step_spreads_json's shape, one point).
nlohmann::json details_json(store::Database& db, const store::RunDetails& d);

}  // namespace kiln::monitor
