// How long a rank waits for the other ranks at a collective or a transfer before it gives
// up, for every communicator of the process: a rank that died or hangs must not hold the
// rest of the run forever. A wait that gives up throws WaitGaveUp naming the call and the
// ranks it waited for, so rank 0 records the run as failed on its way out.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/check.h"

namespace kiln {

struct WaitLimits {
  double timeout_s = 0;  // 0: no limit
  // True once the process was asked to stop (SIGINT, SIGTERM). mpirun stops every rank
  // that way when one of them dies and kills them a second later, so a wait still open
  // kStopGrace after the signal gives up then, leaving rank 0 time to record the failure.
  // The ranks of a clean stop all reach the step boundary well within it.
  bool (*stop_requested)() = nullptr;
};

constexpr double kStopGrace = 0.5;  // seconds

// The limits of this process's waits from now on; the default is no limit.
void set_wait_limits(const WaitLimits& limits);
double wait_timeout_s();

// While one lives, waits have no limit: a paused run holds its other ranks at a broadcast
// for as long as the pause lasts.
class UnlimitedWaits {
 public:
  UnlimitedWaits();
  ~UnlimitedWaits();
  UnlimitedWaits(const UnlimitedWaits&) = delete;
  UnlimitedWaits& operator=(const UnlimitedWaits&) = delete;
};

// Thrown by a wait past its limits: every rank that waits gives up about the same time.
struct WaitGaveUp : Error {
  using Error::Error;
};

// Thrown by a wait when another rank reported its own failure: the run ends, and the
// failure is that rank's, told in its words.
struct PeerFailed : Error {
  using Error::Error;
};

// Set while an MPI session is open: throws PeerFailed when another rank has told of its own
// failure. Every wait calls it, so a wait on a GPU collective hears of a peer's failure at
// once, as a wait on MPI does. Null: no check.
void set_peer_failure_check(void (*check)());

// Set while an MPI session is open (trainer/parallel/mpi_roll_call.h). `call`: on rank 0,
// calls the roll for up to `seconds` and says who did not answer ("" elsewhere); a wait that
// gives up puts it in its message. `answer`: answers rank 0's roll call if it made one; a wait
// that has lasted a while polls it. Null: no roll call.
struct RollCall {
  std::string (*call)(double seconds) = nullptr;
  void (*answer)() = nullptr;
};
void set_roll_call(const RollCall& roll);

// One wait: `what` names the call and the ranks it waits for ("all_reduce over ranks 0-3").
class WaitClock {
 public:
  explicit WaitClock(std::string what);
  // Throws PeerFailed when another rank told of its failure, and WaitGaveUp once the wait
  // is past its limits (on rank 0 naming, by the roll call, the ranks that did not answer).
  void check();

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_;
  Clock::time_point start_;
  Clock::time_point stop_seen_{};  // when this wait first saw the stop signal
};

// What a wait is for, in its messages: "all_reduce over ranks 0-3" (a run of consecutive
// ranks), "all_reduce over ranks 0,2,5", or "over ranks 0-3" for an empty call.
std::string over_ranks(const std::string& call, const std::vector<int>& ranks);

}  // namespace kiln
