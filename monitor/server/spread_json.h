// The spread across ranks in GET /api/runs/{run}/metrics' answer for a wide run
// (store/metric_spread.h, docs/dashboard.md#api): columns, as a rank's series are.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "store/database.h"
#include "store/metric_queries.h"

namespace kiln::monitor {

// The key's spread over the query's steps and points, or null when the key is not a per-rank
// field (loss, lr: the same on every rank, rank 0's series says it):
// {"step", "time", "ranks", "min", "mean", "max", "slowest_rank", "slowest"}, one entry a point.
nlohmann::json spread_json(store::Database& db, int64_t run_id, const store::SeriesQuery& query);

}  // namespace kiln::monitor
