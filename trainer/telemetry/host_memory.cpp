#include "trainer/telemetry/host_memory.h"

#include <cstdio>

namespace kiln {

std::optional<HostMemory> host_memory() {
  std::FILE* f = std::fopen("/proc/meminfo", "re");
  if (!f) return std::nullopt;
  long long total_kib = -1, available_kib = -1;
  char line[256];
  while (std::fgets(line, sizeof line, f) && (total_kib < 0 || available_kib < 0)) {
    // "MemTotal:       16318480 kB"
    long long kib = 0;
    if (std::sscanf(line, "MemTotal: %lld kB", &kib) == 1) total_kib = kib;
    if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) available_kib = kib;
  }
  std::fclose(f);
  if (total_kib < 0 || available_kib < 0) return std::nullopt;
  return HostMemory{(total_kib - available_kib) * 1024, total_kib * 1024};
}

}  // namespace kiln
