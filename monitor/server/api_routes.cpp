#include "monitor/server/api_routes.h"

#include <array>
#include <string>
#include <string_view>

#include "base/check.h"
#include "monitor/server/cross_site.h"
#include "monitor/server/static_ui.h"
#include "store/error.h"

namespace kiln::monitor {

using nlohmann::json;

namespace {

constexpr std::string_view kRunSegment = "{run}";
constexpr std::string_view kSweepSegment = "{sweep}";
constexpr const char* kReadsNeedTheToken =
    "this server has a token: send it as \"Authorization: Bearer TOKEN\" (the dashboard asks for it once)";

struct Route {
  http::verb method;
  std::array<std::string_view, 4> pattern;  // path segments; empty ones end it
  Reply (*handler)(ApiCall&);
  bool changes_state;
};

Reply live_without_upgrade(ApiCall&) {
  throw ApiError(http::status::upgrade_required, "this endpoint is a WebSocket; connect with ws://");
}

constexpr Route kRoutes[] = {
    {http::verb::get, {"api", "runs"}, get_runs, false},
    {http::verb::get, {"api", "runs", kRunSegment}, get_run, false},
    {http::verb::delete_, {"api", "runs", kRunSegment}, delete_run, true},
    {http::verb::get, {"api", "runs", kRunSegment, "metrics"}, get_metrics, false},
    {http::verb::get, {"api", "runs", kRunSegment, "valid"}, get_valid, false},
    {http::verb::get, {"api", "runs", kRunSegment, "samples"}, get_samples, false},
    {http::verb::get, {"api", "runs", kRunSegment, "experts"}, get_experts, false},
    {http::verb::get, {"api", "runs", kRunSegment, "ranks"}, get_ranks, false},
    {http::verb::get, {"api", "runs", kRunSegment, "rank-heat"}, get_rank_heat, false},
    {http::verb::get, {"api", "runs", kRunSegment, "alerts"}, get_alerts, false},
    {http::verb::get, {"api", "runs", kRunSegment, "system"}, get_system, false},
    {http::verb::get, {"api", "runs", kRunSegment, "events"}, get_events, false},
    {http::verb::get, {"api", "runs", kRunSegment, "commands"}, get_commands, false},
    {http::verb::post, {"api", "runs", kRunSegment, "commands"}, post_command, true},
    {http::verb::post, {"api", "runs", kRunSegment, "tags"}, post_tags, true},
    {http::verb::put, {"api", "runs", kRunSegment, "notes"}, put_notes, true},
    {http::verb::get, {"api", "runs", kRunSegment, "export.csv"}, get_export_csv, false},
    {http::verb::get, {"api", "runs", kRunSegment, "live"}, live_without_upgrade, false},
    {http::verb::get, {"api", "config-keys"}, get_config_keys, false},
    {http::verb::get, {"api", "compare"}, get_compare, false},
    {http::verb::get, {"api", "metric-fields"}, get_metric_fields, false},
    {http::verb::get, {"api", "sweeps"}, get_sweeps, false},
    {http::verb::get, {"api", "sweeps", kSweepSegment}, get_sweep, false},
    {http::verb::get, {"metrics"}, get_prometheus, false},
    {http::verb::post, {"api", "session"}, post_session, true},
};

bool matches(const Route& route, const RequestTarget& target) {
  size_t n = 0;
  while (n < route.pattern.size() && !route.pattern[n].empty()) ++n;
  if (n != target.segments.size()) return false;
  for (size_t i = 0; i < n; ++i)
    if (route.pattern[i] != kRunSegment && route.pattern[i] != kSweepSegment &&
        route.pattern[i] != target.segments[i])
      return false;
  return true;
}

bool is_api(const RequestTarget& target) {
  return !target.segments.empty() && (target.segments[0] == "api" || target.segments[0] == "metrics");
}

bool has_run(const Route& route) { return route.pattern[2] == kRunSegment; }

// The route for this method and path; a path no route has is 404, a path with routes for
// other methods only is 405.
const Route& find_route(const Request& request, const RequestTarget& target) {
  std::string allowed;
  for (const Route& route : kRoutes) {
    if (!matches(route, target)) continue;
    if (route.method == request.method()) return route;
    allowed += (allowed.empty() ? "" : ", ") + std::string(http::to_string(route.method));
  }
  if (allowed.empty()) throw ApiError(http::status::not_found, "no such endpoint: " + std::string(request.target()));
  throw ApiError(http::status::method_not_allowed,
                 std::string(request.method_string()) + " is not allowed here; allowed: " + allowed);
}

template <typename Body>
Reply guarded(Body body) {
  try {
    return body();
  } catch (const ApiError& e) {
    return error_reply(e.status, e.what());
  } catch (const store::DatabaseError& e) {
    return error_reply(http::status::service_unavailable, e.what());
  } catch (const Error& e) {
    // The store's refusals of what the request asked (an unknown metric key, a bad status
    // name, an empty tag...): the client's to fix.
    return error_reply(http::status::bad_request, e.what());
  } catch (const std::exception& e) {
    return error_reply(http::status::internal_server_error, e.what());
  }
}

}  // namespace

void refuse_read_only(const ServedStore& store, int64_t run_id) {
  throw ApiError(http::status::forbidden,
                 "run " + address_text(store, run_id) + " is in store '" + store.label + "' (" + store.path +
                     "), which this server shows read-only: change it with `kiln runs ... --store " + store.path +
                     "`, or from a dashboard that serves that store first");
}

ConnectionPool::Lease ApiCall::reads() const { return store->reads.borrow(); }

ConnectionPool::Lease ApiCall::writes() const {
  if (!store->writes) refuse_read_only(*store, run_id);
  return store->writes->borrow();
}

nlohmann::json ApiCall::run_address() const { return address(*store, run_id); }

json ApiCall::json_body() const {
  json body = json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw ApiError(http::status::bad_request, "the body is not valid JSON");
  if (!body.is_object()) throw ApiError(http::status::bad_request, "the body must be a JSON object");
  return body;
}

Reply answer(SharedState& state, const Request& request) {
  return guarded([&] {
    const RequestTarget target = parse_target(request.target());
    if (request.method() == http::verb::get && !is_api(target))
      if (auto file = static_file(request.target().substr(0, request.target().find('?')))) return *file;
    const Route& route = find_route(request, target);
    if (route.changes_state && !state.access().may_change(request))
      throw ApiError(http::status::unauthorized,
                     "this request changes a run: send the server's token as "
                     "\"Authorization: Bearer TOKEN\"");
    if (!state.access().may_read(request)) throw ApiError(http::status::unauthorized, kReadsNeedTheToken);
    if (route.changes_state && request.method() != http::verb::delete_ &&
        !is_json_content_type(request[http::field::content_type]))
      throw ApiError(http::status::unsupported_media_type,
                     "send the body as JSON, with \"Content-Type: application/json\"");
    ApiCall call{state, request, target};
    call.store = &state.stores().first();
    if (has_run(route)) {
      const StoredRow run = resolve_run(state.stores(), target.segments[2]);
      call.store = run.store;
      call.run_id = run.id;
      // Steering, tags, notes and removal of another store's run: refused before any of it.
      if (route.changes_state && !run.store->writable) refuse_read_only(*run.store, run.id);
    }
    return route.handler(call);
  });
}

std::variant<StoredRow, Reply> live_run(SharedState& state, const Request& request) {
  StoredRow run;
  Reply reply = guarded([&] {
    const RequestTarget target = parse_target(request.target());
    if (request.method() != http::verb::get || target.segments.size() != 4 || target.segments[0] != "api" ||
        target.segments[1] != "runs" || target.segments[3] != "live")
      throw ApiError(http::status::not_found, "WebSocket endpoints: /api/runs/{run}/live");
    if (!state.access().may_read(request)) throw ApiError(http::status::unauthorized, kReadsNeedTheToken);
    run = resolve_run(state.stores(), target.segments[2]);
    return Reply{};
  });
  if (reply.body.empty()) return run;
  return reply;
}

}  // namespace kiln::monitor
