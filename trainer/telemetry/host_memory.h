// The machine's memory, from /proc/meminfo (Linux): what the run's process shares it with
// shows here, where its own resident size (process_stats.h) does not.
#pragma once

#include <cstdint>
#include <optional>

namespace kiln {

struct HostMemory {
  int64_t used = 0;   // bytes in use: MemTotal - MemAvailable, what no new process could have
  int64_t total = 0;  // bytes
};

// Nothing when /proc/meminfo cannot be read or lacks the two lines (not Linux, or a kernel
// before 3.14).
std::optional<HostMemory> host_memory();

}  // namespace kiln
