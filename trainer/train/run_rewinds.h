// Rewinding past a loss spike (docs/resilience.md#rewinding-past-a-loss-spike): at the step
// boundary after a loss_spike alert whose action is `rewind`, the first rank picks the newest
// checkpoint of the run before the spike, or says why the run trains on instead, and every
// rank learns which; the trainer restores it as a resume would (Trainer::rewind), and the first
// rank then says so in one line and records the rewind, with the losses it abandoned, in the
// store.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "trainer/config/config.h"
#include "trainer/parallel/communicator.h"
#include "trainer/train/rewind_plan.h"
#include "trainer/train/run_checkpoints.h"
#include "trainer/train/run_recorder.h"

namespace kiln {

class RunRewinds {
 public:
  // recorder: the first rank's, when the run is recorded; a resumed run goes on counting the
  // rewinds its record holds.
  RunRewinds(const Config& config, Communicator& world, const RunCheckpoints& checkpoints, RunRecorder* recorder,
             std::FILE* out);

  // Every rank together, at the boundary after `step` whose decision asks to go back past the
  // loss spike at spike_step: the checkpoint folder to go back to, the same on every rank; ""
  // when the run trains on (it has no checkpoint before the spike, or made alerts.max_rewinds),
  // which the first rank says in one line and records as a `status` event.
  std::string choose(int64_t spike_step, int64_t step);
  // The first rank, once every rank is back at the checkpoint of to_step, reading past
  // `skipped`: the line that says so, and the rewind in the store.
  void record(int64_t spike_step, int64_t from_step, int64_t to_step, const std::string& checkpoint,
              const SkippedData& skipped);

 private:
  bool is_first_rank() const { return world_.rank() == 0; }

  const Config& config_;
  Communicator& world_;
  const RunCheckpoints& checkpoints_;
  RunRecorder* recorder_;
  std::FILE* out_;
  int64_t done_ = 0;  // rewinds this run has made (the first rank's count)
};

}  // namespace kiln
