// One API request as the route handlers see it, and the handlers the router dispatches to
// (docs/dashboard.md lists the routes).
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "monitor/server/api_reply.h"
#include "monitor/server/request_target.h"
#include "monitor/server/shared_state.h"

namespace kiln::monitor {

using Request = http::request<http::string_body>;

struct ApiCall {
  SharedState& state;
  const Request& request;
  const RequestTarget& target;
  int64_t run_id = 0;  // resolved from {run} for the routes that have one

  // The body as a JSON object; anything else is an ApiError (400).
  nlohmann::json json_body() const;
};

// A run as typed (an id, a name or an unambiguous prefix) as its id; an unknown run is an
// ApiError 404 naming it.
int64_t resolve_run_id(SharedState& state, const std::string& typed);

// api_read.cpp
Reply get_runs(ApiCall& call);
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
