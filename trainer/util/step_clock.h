// The host clock the trainer times its steps, phases and pauses with.
#pragma once

#include <chrono>

namespace kiln {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double ms_since(Clock::time_point start) { return seconds_since(start) * 1e3; }

}  // namespace kiln
