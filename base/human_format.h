// Sizes and durations as people read them: "3.2 MiB", "4m05s". The trainer's progress lines and
// the history views (`kiln runs`, `kiln tui`) write them alike, so they live here, below both.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

std::string human_bytes(uint64_t bytes);
std::string human_duration(double seconds);
// A moment in this machine's time zone, written by strftime's `format` (at most 63 characters).
std::string local_time_text(double unix_seconds, const char* format);

}  // namespace kiln
