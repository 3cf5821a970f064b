// GET /api/sweeps and GET /api/sweeps/{sweep}: the sweeps with their progress, and one
// sweep's points with their runs' final and best figures, as the sweep page compares them
// (docs/sweeps.md#viewing-a-sweep). The JSON is store/sweep_json.h's, as kiln sweep show's.
#include <cstdint>
#include <string>

#include "base/check.h"
#include "monitor/server/api_call.h"
#include "monitor/server/server_limits.h"
#include "store/error.h"
#include "store/sweep_json.h"
#include "store/sweep_queries.h"

namespace kiln::monitor {

namespace {

int64_t resolve_sweep_id(SharedState& state, const std::string& typed) {
  auto db = state.reads().borrow();
  try {
    return store::resolve_sweep(*db, typed);
  } catch (const store::DatabaseError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(http::status::not_found, e.what());
  }
}

}  // namespace

Reply get_sweeps(ApiCall& call) {
  const int64_t limit = call.target.integer("limit").value_or(limits::kMaxSweeps);
  if (limit < 1 || limit > limits::kMaxSweeps)
    throw ApiError(http::status::bad_request, "limit must be from 1 to " + std::to_string(limits::kMaxSweeps));
  auto db = call.state.reads().borrow();
  nlohmann::json sweeps = nlohmann::json::array();
  for (const auto& sweep : store::list_sweeps(*db, limit)) sweeps.push_back(store::to_json(sweep));
  return json_reply(sweeps);
}

Reply get_sweep(ApiCall& call) {
  const int64_t sweep_id = resolve_sweep_id(call.state, call.target.segments[2]);
  auto db = call.state.reads().borrow();
  return json_reply(store::to_json(store::sweep_details(*db, sweep_id)));
}

}  // namespace kiln::monitor
