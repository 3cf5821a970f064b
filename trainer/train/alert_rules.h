// The alert rules (docs/alerts.md), judged on rank 0 over what the ranks measured: a loss or
// gradient norm that is not a number, a loss or gradient-norm spike, throughput falling
// below its recent median, a straggling rank, a stalled step, memory near a rank's limit.
// Pure logic over numbers, so each rule is tested on sequences written by hand.
//
// Rules are edge-triggered: a rule (per rank for straggler and memory) fires when its
// condition starts to hold and again only once it has stopped holding and starts again, so
// a run that stays bad fires once, not at every step.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace kiln {

// One rank's part of a logged step.
struct RankStep {
  // Milliseconds the rank worked: forward, backward and optimizer, without the time it
  // waited for the others (exposed communication) or for data. A slow rank's own work is
  // long; the ranks that wait for it show the wait in communication instead.
  double work_ms = 0;
  int64_t memory_bytes = 0;  // the most it held so far
};

// One logged step, as rank 0 has gathered it; ranks[r] is rank r's.
struct LoggedStep {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  std::vector<RankStep> ranks;
};

// Where a rank runs and how much memory it can reach, for the rules that name ranks.
struct RankLimits {
  std::string host;
  int64_t memory_bytes = 0;  // 0: unknown, the memory rule skips the rank
};

struct FiredAlert {
  std::string rule;
  std::optional<int64_t> step;
  std::optional<int> rank;
  double value = 0;
  double threshold = 0;
  std::string message;  // one line
};

class AlertRules {
 public:
  AlertRules(const AlertsConfig& config, std::vector<RankLimits> ranks);

  // The rules a logged step trips: spikes, throughput, stragglers, memory.
  std::vector<FiredAlert> observe(const LoggedStep& s);
  // Every step: a loss or gradient norm that is Inf or NaN. `skipped`: the loss scaler
  // skipped the step for overflowed gradients, which it handles (not an alert).
  std::optional<FiredAlert> check_numbers(int64_t step, double loss, double grad_norm, bool skipped);
  // The step after `last_step` has run `seconds` without finishing.
  std::optional<FiredAlert> check_stall(int64_t last_step, double seconds);
  // A step finished: a stall is over.
  void step_finished() { active_.erase("stall"); }
  // The run went back to `step` (a rewind past a loss spike): the spike rules judge the steps
  // it trains again against its values up to there, as if the steps it abandoned never were,
  // and a spike there may fire again.
  void rewound_to(int64_t step);

 private:
  // Whether the condition `key` (a rule, or a rule and rank) now starts to hold: true once
  // per episode.
  bool starts(const std::string& key, bool holds);
  // A logged step's value, as the spike rules keep it.
  struct StepValue {
    int64_t step = 0;
    double value = 0;
  };
  std::optional<FiredAlert> spike(const char* rule, const char* what, double zscore, std::deque<StepValue>& history,
                                  const LoggedStep& s, double value);
  std::optional<FiredAlert> slow_throughput(const LoggedStep& s);
  void stragglers(const LoggedStep& s, std::vector<FiredAlert>& fired);
  void memory(const LoggedStep& s, std::vector<FiredAlert>& fired);

  AlertsConfig config_;
  std::vector<RankLimits> ranks_;
  std::set<std::string> active_;  // the episodes under way
  // The previous logged steps' values that were not themselves alerts, newest last.
  std::deque<StepValue> losses_, grad_norms_;
  std::deque<double> throughputs_;
  std::vector<int> slow_streak_;  // per rank: logged steps in a row above the median rank
  // Logged steps in a row below the throughput limit, and, once it fired, above it again.
  int slow_steps_ = 0, recovered_steps_ = 0;
};

}  // namespace kiln
