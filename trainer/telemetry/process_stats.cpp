#include "trainer/telemetry/process_stats.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

namespace kiln {
namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double wall_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

ProcessStats::ProcessStats() : last_cpu_s_(cpu_seconds()), last_wall_s_(wall_seconds()) {}

double ProcessStats::cpu_percent() {
  const double cpu = cpu_seconds(), wall = wall_seconds();
  const double percent = wall > last_wall_s_ ? 100.0 * (cpu - last_cpu_s_) / (wall - last_wall_s_) : 0;
  last_cpu_s_ = cpu;
  last_wall_s_ = wall;
  return percent;
}

int64_t ProcessStats::rss_bytes() {
  // statm: size resident shared ... in pages.
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (!f) return 0;
  long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * sysconf(_SC_PAGESIZE) : 0;
}

int64_t ProcessStats::peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace kiln
