// One API request as the route handlers see it, and the handlers the router dispatches to
// (docs/dashboard.md lists the routes).
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "monitor/server/api_reply.h"
#include "monitor/server/request_target.h"
#include "monitor/server/run_address.h"
#include "monitor/server/shared_state.h"

namespace kiln::monitor {

using Request = http::request<http::string_body>;

struct ApiCall {
  SharedState& state;
  const Request& request;
  const RequestTarget& target;
  // For the routes with a {run}: the run (run_address.h resolves it) and its store.
  int64_t run_id = 0;
  ServedStore* store = nullptr;

  // The body as a JSON object; anything else is an ApiError (400).
  nlohmann::json json_body() const;
  // A connection to the run's store. For writing, a store the server shows read-only is an
  // ApiError 403 naming it, before anything is opened.
  ConnectionPool::Lease reads() const;
  ConnectionPool::Lease writes() const;
  // The run's id as the API hands it out (run_address.h).
  nlohmann::json run_address() const;
};

// Why a change to a run of a read-only store is refused (403), in one line.
[[noreturn]] void refuse_read_only(const ServedStore& store, int64_t run_id);

// api_read.cpp
Reply get_runs(ApiCall& call);
Reply get_config_keys(ApiCall& call);
Reply get_run(ApiCall& call);
Reply get_metrics(ApiCall& call);
// The metric list (store/metric_fields.h) the dashboard draws its charts and columns from.
Reply get_metric_fields(ApiCall& call);
Reply get_valid(ApiCall& call);
Reply get_samples(ApiCall& call);
Reply get_system(ApiCall& call);
Reply get_events(ApiCall& call);
Reply get_commands(ApiCall& call);
Reply get_export_csv(ApiCall& call);
Reply get_compare(ApiCall& call);
// api_experts.cpp
Reply get_experts(ApiCall& call);
// api_ranks.cpp
Reply get_ranks(ApiCall& call);
Reply get_rank_heat(ApiCall& call);
Reply get_alerts(ApiCall& call);
// api_sweeps.cpp: /api/sweeps/{sweep} resolves its sweep itself (an id, a name or a prefix)
Reply get_sweeps(ApiCall& call);
Reply get_sweep(ApiCall& call);
// api_edit.cpp
Reply post_command(ApiCall& call);
Reply post_tags(ApiCall& call);
Reply put_notes(ApiCall& call);
Reply delete_run(ApiCall& call);
// prometheus.cpp
Reply get_prometheus(ApiCall& call);
// api_session.cpp
Reply post_session(ApiCall& call);

}  // namespace kiln::monitor
