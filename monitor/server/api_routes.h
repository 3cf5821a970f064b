// The router: which handler answers a request, with the checks every route shares (method,
// token, the run named in the path) and the mapping of failures to HTTP statuses.
#pragma once

#include <cstdint>
#include <variant>

#include "monitor/server/api_call.h"

namespace kiln::monitor {

// The answer to one plain HTTP request. Never throws: every failure becomes a JSON error
// with its status (400 bad input, 401 no token, 403 a change to a run of a read-only store,
// 404 unknown path or run, 405 wrong method, 409 a run in the wrong state, 415 a change whose
// body is not JSON, 503 store unavailable, 500 anything else).
Reply answer(SharedState& state, const Request& request);

// For a WebSocket upgrade: the run that /api/runs/{run}/live names, in any of the stores, or
// the error reply to send instead of upgrading.
std::variant<StoredRow, Reply> live_run(SharedState& state, const Request& request);

}  // namespace kiln::monitor
