// What a run does with the commands it finds in the store at a step boundary.
//
// Rank 0 reads the pending commands and decides; the decision is what every rank applies at
// the same step (with several ranks it is broadcast over the communicator before anyone
// acts). Each command gets an outcome, applied or rejected with a reason, which the store
// keeps as the command's status and a `command` event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/types.h"
#include "trainer/steer/setting.h"

namespace kiln {

struct CommandOutcome {
  int64_t command_id = 0;
  bool applied = false;
  std::string reason;
};

struct SteeringDecision {
  bool pause = false;   // running -> paused
  bool resume = false;  // paused -> running
  bool stop = false;    // end the run after this step, as `stopped` (writing a checkpoint)
  bool checkpoint = false;  // write a checkpoint after this step
  bool release = false;     // with stop: end as `released`, to be resumed (kiln runs release)
  // An alert's action (loss_spike=rewind): the step of the loss spike to go back past, to the
  // newest checkpoint before it (run_rewinds.h); 0: none.
  int64_t rewind_past = 0;
  std::vector<Setting> settings;        // in the order the commands came
  std::vector<size_t> setting_outcome;  // settings[i]'s index in outcomes
  std::vector<CommandOutcome> outcomes;

  bool empty() const { return outcomes.empty(); }
};

// Decides on the pending commands, oldest first, of a run that is `paused` or running.
// Pause and resume toggle in order (pause, resume in one batch is a no-op, each applied);
// commands after a stop or a release are rejected (a release is a stop that ends the run as
// `released`, its checkpoint written); a set whose key or value is bad is rejected with the
// parse error; several checkpoint commands in one batch make one checkpoint.
SteeringDecision decide(const std::vector<store::Command>& pending, bool paused);

}  // namespace kiln
