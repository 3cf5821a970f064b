// The launcher's side of a sweep's record (kiln sweep, docs/sweeps.md): the sweep and all its
// points, written in one transaction before any point launches; each point's run name as it
// launches; a heartbeat while the sweep's process lives; the end, and whether the sweep
// finished or was interrupted (SweepStatus, sweep_queries.h). A sweep taken up again
// (kiln sweep --resume) is claimed by its new process in one transaction, which refuses a
// sweep whose process still lives. The views read sweeps through sweep_queries.h.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/database.h"
#include "store/sweep_queries.h"

namespace kiln::store {

struct NewSweep {
  std::string name;          // a run name's rules (check_run_name): it names runs and a folder
  std::string spec_json;     // what relaunches it: base config, grid, sampling, parallelism
  std::string command_line;  // stored redacted (user_text.h)
  std::string workdir;
  std::string host;
  int64_t pid = 0;
  std::vector<std::string> points;  // each point's params_json, in point order
};

// Inserts the sweep and its points; returns its id. A taken name, text that is not UTF-8 or
// JSON, or more than kMaxSweepPoints points is refused in one line, and nothing is written.
int64_t create_sweep(Database& db, const NewSweep& sweep);

// The run launched for a point.
void set_point_run(Database& db, int64_t sweep_id, int64_t point, const std::string& run_name);

struct ClaimedSweep {
  std::string name;
  std::string spec_json;
  std::string workdir;
  struct Point {
    int64_t point = 0;
    std::string params_json;
    std::string run_name;  // empty: never launched
  };
  std::vector<Point> points;
  // How it had ended before this claim (a sweep whose process died unrecorded: interrupted),
  // for a resume that fails before it launches to leave it as it was.
  SweepStatus ended_as = SweepStatus::Interrupted;
};

// Takes up an interrupted sweep in this process (host, pid): its heartbeat restarts and its
// end is cleared. Refused while the sweep's recorded process lives: its heartbeat is younger
// than stale_after_s, and it is not known to be gone (same host, no process of its pid).
ClaimedSweep claim_sweep(Database& db, int64_t sweep_id, const std::string& host, int64_t pid,
                         double stale_after_s);

// Records the sweep's end, `how` it ended: Ended (it launched every point and saw each end)
// or Interrupted (it stopped before). Its process is done launching (kiln sweep --resume may
// take it up).
void end_sweep(Database& db, int64_t sweep_id, SweepStatus how);

// Updates the sweep's heartbeat every interval on its own connection, until destroyed.
class SweepHeartbeat {
 public:
  SweepHeartbeat(const std::string& path, int64_t sweep_id, std::chrono::milliseconds interval);
  ~SweepHeartbeat();
  SweepHeartbeat(const SweepHeartbeat&) = delete;
  SweepHeartbeat& operator=(const SweepHeartbeat&) = delete;

 private:
  void beat_until_stopped();

  std::unique_ptr<Database> db_;
  int64_t sweep_id_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::store
