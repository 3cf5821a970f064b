// Whether the process that records a live-looking run or sweep is known to be gone, so that
// it may be taken over at once instead of after its heartbeat goes stale.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::store {

// True when the process ran on this_host and no process has its id (killed, say, before it
// could end what it recorded). Another host's process, or one without a recorded pid, cannot
// be judged and reads as alive, and so does a recycled id: refusing to take over is the safe
// side.
bool process_gone(const std::string& host, std::optional<int64_t> pid, const std::string& this_host);

}  // namespace kiln::store
