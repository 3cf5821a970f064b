#include "base/mpi_launch.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "base/check.h"

namespace kiln {
namespace {

// A number from a file of the CPU's topology in sysfs; -1 when it cannot be read.
long topology_number(int cpu, const char* name) {
  std::ifstream file("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + name);
  long value = -1;
  return file >> value ? value : -1;
}

}  // namespace

MpirunWords mpirun_words(int ranks, int cores, bool root) {
  KILN_CHECK(ranks > 1 && cores > 0, "mpirun_words: ranks > 1 and cores > 0");
  MpirunWords words{{"mpirun", "-np", std::to_string(ranks)}, ""};
  if (root) words.argv.push_back("--allow-run-as-root");
  if (ranks > cores) {
    words.argv.push_back("--oversubscribe");
    words.note = std::to_string(ranks) + " ranks on " + std::to_string(cores) + (cores == 1 ? " core" : " cores") +
                 ": oversubscribing (slower than 1 rank per core)";
  }
  return words;
}

int mpirun_slots() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return 1;
  std::set<std::pair<long, long>> cores;  // (package, core)
  int cpus = 0;
  bool described = true;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    ++cpus;
    const long package = topology_number(cpu, "physical_package_id"), core = topology_number(cpu, "core_id");
    if (package < 0 || core < 0) described = false;
    cores.emplace(package, core);
  }
  return std::max(1, described ? static_cast<int>(cores.size()) : cpus);
}

}  // namespace kiln
