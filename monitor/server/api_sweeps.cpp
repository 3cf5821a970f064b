// GET /api/sweeps and GET /api/sweeps/{sweep}: the sweeps with their progress, and one
// sweep's points with their runs' final and best figures, as the sweep page compares them
// (docs/sweeps.md#viewing-a-sweep). The JSON is store/sweep_json.h's, as kiln sweep show's.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "monitor/server/api_call.h"
#include "monitor/server/server_limits.h"
#include "store/sweep_json.h"
#include "store/sweep_queries.h"

namespace kiln::monitor {

Reply get_sweeps(ApiCall& call) {
  const int64_t limit = call.target.integer("limit").value_or(limits::kMaxSweeps);
  if (limit < 1 || limit > limits::kMaxSweeps)
    throw ApiError(http::status::bad_request, "limit must be from 1 to " + std::to_string(limits::kMaxSweeps));
  // Each store's newest `limit`; over several stores, one list newest first, cut to `limit`.
  struct Listed {
    double created_at;
    size_t store;
    nlohmann::json item;
  };
  std::vector<Listed> listed;
  for (size_t i = 0; i < call.state.stores().size(); ++i) {
    ServedStore& served = call.state.stores()[i];
    auto db = served.reads.borrow();
    for (const auto& sweep : store::list_sweeps(*db, limit)) {
      nlohmann::json item = store::to_json(sweep);
      item["id"] = address(served, sweep.id);
      item["store"] = served.label;
      listed.push_back({sweep.created_at, i, std::move(item)});
    }
  }
  std::stable_sort(listed.begin(), listed.end(), [](const Listed& a, const Listed& b) {
    return a.created_at != b.created_at ? a.created_at > b.created_at : a.store < b.store;
  });
  if (listed.size() > static_cast<size_t>(limit)) listed.resize(static_cast<size_t>(limit));
  nlohmann::json sweeps = nlohmann::json::array();
  for (Listed& sweep : listed) sweeps.push_back(std::move(sweep.item));
  return json_reply(sweeps);
}

Reply get_sweep(ApiCall& call) {
  const StoredRow sweep = resolve_sweep(call.state.stores(), call.target.segments[2]);
  auto db = sweep.store->reads.borrow();
  nlohmann::json details = store::to_json(store::sweep_details(*db, sweep.id));
  // The sweep and its points' runs go by the addresses of its store.
  details["sweep"]["id"] = address(*sweep.store, sweep.id);
  details["sweep"]["store"] = sweep.store->label;
  for (nlohmann::json& point : details["points"])
    if (point["run_id"].is_number_integer()) point["run_id"] = address(*sweep.store, point["run_id"].get<int64_t>());
  return json_reply(details);
}

}  // namespace kiln::monitor
