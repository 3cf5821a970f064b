#include "trainer/parallel/wait_limits.h"

#include <atomic>

#include <fmt/format.h>

namespace kiln {
namespace {

WaitLimits limits;
std::atomic<int> unlimited{0};
void (*peer_failure_check)() = nullptr;

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

void WaitClock::check() {
  if (peer_failure_check != nullptr) peer_failure_check();
  if (unlimited > 0) return;
  const Clock::time_point now = Clock::now();
  const double waited = seconds_between(start_, now);
  if (limits.timeout_s > 0 && waited > limits.timeout_s)
    throw WaitGaveUp(fmt::format("no answer in {:g} s at {} (parallel.timeout_s): a rank there died or "
                     "hangs",
                     limits.timeout_s, what_));
  if (limits.stop_requested == nullptr || !limits.stop_requested()) return;
  if (stop_seen_ == Clock::time_point{}) stop_seen_ = now;
  if (seconds_between(stop_seen_, now) > kStopGrace)
    throw WaitGaveUp(fmt::format("stopped by a signal after waiting {:.1f} s at {}: a rank there died "
                     "(mpirun stops every rank when one dies) or was stopped mid-step",
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
