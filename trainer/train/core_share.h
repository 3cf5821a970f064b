// Shares the machine's cores among the CPU trainings running on it. OpenMP and OpenBLAS
// keep every thread of a parallel region busy until the last one arrives, so two runs that
// each take every core do not share the machine: each region waits for a thread that the
// other run holds, and both slow down twenty-fold or more. Each CPU run instead registers in
// a folder of this user's runs on this machine and trains on its even share of the cores,
// counted again as runs start and end (docs/config.md, backend.threads). An entry counts while
// the process that made it runs: its id and its start time, so an id the system gave to
// another process since (another user's, another program) is not a run.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kiln {

// The cores this process may run on (its affinity mask: taskset, cpusets, containers).
int usable_cores();

// Where this user's CPU runs register: $XDG_RUNTIME_DIR/kiln-cpu-runs, else
// /tmp/kiln-<uid>/cpu-runs.
std::string cpu_run_registry();

// When a run says that its share of the cores changed. Its threads follow the count at once;
// the notice waits for a change that lasts (the same threads for kLasting) and comes at most
// once every kEvery, so runs that come and go for seconds (a test suite beside a demo) never
// reach the run's output. The share a run starts with is said at once.
class ShareNotice {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kLasting{10};
  static constexpr std::chrono::seconds kEvery{60};

  // usual: the threads the run has alone, which go without saying.
  explicit ShareNotice(int usual) : said_(usual), seen_(usual) {}
  // The run has `threads` now: whether to say so.
  bool due(int threads, Clock::time_point now);

 private:
  int said_;  // the threads last said, or the usual ones
  int seen_;  // the threads seen since seen_since_
  Clock::time_point seen_since_{};
  std::optional<Clock::time_point> said_at_;
  bool first_ = true;
};

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
  // Whether to say the share now (ShareNotice), for the threads it gives the run now.
  bool say_share(ShareNotice::Clock::time_point now = ShareNotice::Clock::now());

 private:
  std::string registry_;
  std::string entry_;  // this run's file in the registry
  int cores_;
  int at_least_;
  int runs_ = 1;
  std::chrono::steady_clock::time_point counted_;
  ShareNotice notice_;
};

}  // namespace kiln
