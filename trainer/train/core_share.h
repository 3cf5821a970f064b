// Shares the machine's cores among the CPU trainings running on it. OpenMP and OpenBLAS
// keep every thread of a parallel region busy until the last one arrives, so two runs that
// each take every core do not share the machine: each region waits for a thread that the
// other run holds, and both slow down twenty-fold or more. Each CPU run instead registers in
// a folder of this user's runs on this machine and trains on its even share of the cores,
// counted again as runs start and end (docs/config.md, backend.threads).
#pragma once

#include <chrono>
#include <string>

namespace kiln {

// The cores this process may run on (its affinity mask: taskset, cpusets, containers).
int usable_cores();

// Where this user's CPU runs register: $XDG_RUNTIME_DIR/kiln-cpu-runs, else
// /tmp/kiln-<uid>/cpu-runs.
std::string cpu_run_registry();

class CoreShare {
 public:
  // Registers this process in `registry` (created private to this user; a folder another
  // user owns or a symbolic link is refused) as a run that may use `cores`; `at_least` runs
  // are counted even before they register (the ranks mpirun started here).
  CoreShare(const std::string& registry, int cores, int at_least = 1);
  ~CoreShare();
  CoreShare(const CoreShare&) = delete;
  CoreShare& operator=(const CoreShare&) = delete;

  // This run's threads: its cores divided by the live runs registered (at least one),
  // counted again at most once a second.
  int threads();
  // Counts the live runs now (removing the entries of processes that have ended) and
  // returns this run's threads.
  int recount();
  int runs() const { return runs_; }
  int cores() const { return cores_; }

 private:
  std::string registry_;
  std::string entry_;  // this run's file in the registry
  int cores_;
  int at_least_;
  int runs_ = 1;
  std::chrono::steady_clock::time_point counted_;
};

}  // namespace kiln
