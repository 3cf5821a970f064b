// Sizes and durations as people read them in progress lines: "3.2 MiB", "4m05s".
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

std::string human_bytes(uint64_t bytes);
std::string human_duration(double seconds);

}  // namespace kiln
