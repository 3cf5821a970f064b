#include "trainer/parallel/wait_limits.h"

#include <atomic>

#include <fmt/format.h>

namespace kiln {
namespace {

WaitLimits limits;
std::atomic<int> unlimited{0};
void (*peer_failure_check)() = nullptr;
RollCall roll;

// The roll's window: long enough for every live rank to reach a poll (each polls within a
// fraction of a millisecond while it waits, within a step while it computes), short beside
// the timeout it follows. After mpirun's stop signal there is no roll call: mpirun names the
// rank that died and its host itself, and kills every rank a second later, which a roll call
// that opens connections to the dead ranks' host could outlast before the store hears.
constexpr double kRollAfterTimeout = 2.0;

// A wait answers roll calls once it has lasted this long. Rank 0 calls the roll only after a
// wait of parallel.timeout_s, when every live rank is held in a long wait, so the polls of a
// collective on its way stay as cheap as they were.
constexpr double kAnswerAfter = 0.01;

// Who is missing, by the roll call where there is one; else what can be said without it.
std::string whom(double seconds, const char* otherwise) {
  std::string named = roll.call != nullptr ? roll.call(seconds) : std::string();
  return named.empty() ? otherwise : named;
}

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

void set_wait_limits(const WaitLimits& l) { limits = l; }

double wait_timeout_s() { return limits.timeout_s; }

UnlimitedWaits::UnlimitedWaits() { ++unlimited; }
UnlimitedWaits::~UnlimitedWaits() { --unlimited; }

WaitClock::WaitClock(std::string what) : what_(std::move(what)), start_(Clock::now()) {}

void set_peer_failure_check(void (*check)()) { peer_failure_check = check; }

void set_roll_call(const RollCall& r) { roll = r; }

void WaitClock::check() {
  if (peer_failure_check != nullptr) peer_failure_check();
  const Clock::time_point now = Clock::now();
  const double waited = seconds_between(start_, now);
  if (roll.answer != nullptr && waited > kAnswerAfter) roll.answer();
  if (unlimited > 0) return;
  if (limits.timeout_s > 0 && waited > limits.timeout_s)
    throw WaitGaveUp(fmt::format("no answer in {:g} s at {} (parallel.timeout_s): {}", limits.timeout_s, what_,
                                 whom(kRollAfterTimeout, "a rank there died or hangs")));
  if (limits.stop_requested == nullptr || !limits.stop_requested()) return;
  if (stop_seen_ == Clock::time_point{}) stop_seen_ = now;
  if (seconds_between(stop_seen_, now) > kStopGrace)
    throw WaitGaveUp(fmt::format("stopped by a signal after waiting {:.1f} s at {}: a rank there died "
                                 "(mpirun stops every rank when one dies, naming it) or was stopped mid-step",
                                 waited, what_));
}

std::string over_ranks(const std::string& call, const std::vector<int>& ranks) {
  bool consecutive = ranks.size() > 2;
  for (size_t i = 1; i < ranks.size(); ++i) consecutive &= ranks[i] == ranks[i - 1] + 1;
  const std::string listed = consecutive ? fmt::format("{}-{}", ranks.front(), ranks.back())
                                         : fmt::format("{}", fmt::join(ranks, ","));
  return (call.empty() ? "" : call + " ") + "over ranks " + listed;
}

}  // namespace kiln
