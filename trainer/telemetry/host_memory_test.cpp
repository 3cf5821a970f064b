// The machine's memory as the system readings record it, against /proc/meminfo read apart.
#include "trainer/telemetry/host_memory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace kiln {
namespace {

TEST(HostMemory, UsedIsTotalLessAvailable) {
  const auto memory = host_memory();
  ASSERT_TRUE(memory.has_value()) << "Linux has /proc/meminfo";
  int64_t total_kib = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "MemTotal:") fields >> total_kib;
  }
  EXPECT_EQ(memory->total, total_kib * 1024);
  EXPECT_GT(memory->used, 0);
  EXPECT_LT(memory->used, memory->total);
}

}  // namespace
}  // namespace kiln
