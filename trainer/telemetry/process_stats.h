// This process's CPU use and resident memory, from /proc (Linux).
#pragma once

#include <cstdint>

namespace kiln {

class ProcessStats {
 public:
  ProcessStats();
  // Percent of one core used since the previous call (or since construction); may exceed
  // 100 with several threads busy.
  double cpu_percent();
  static int64_t rss_bytes();
  // The largest resident size so far (the kernel's high-water mark).
  static int64_t peak_rss_bytes();

 private:
  double last_cpu_s_;
  double last_wall_s_;
};

}  // namespace kiln
