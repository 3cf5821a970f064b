// GET of anything outside /api/ and /metrics: the embedded web UI. "/" is the dashboard's
// page; its other files are found by exact path in the embedded table, nothing else.
#pragma once

#include <optional>
#include <string_view>

#include "monitor/server/api_reply.h"

namespace kiln::monitor {

// The file for a request path (the query already cut off), or nothing.
std::optional<Reply> static_file(std::string_view path);

}  // namespace kiln::monitor
