// A run's checkpoints as it trains: the one of a step written once (gathered whole from a
// split model, by every rank together, written by the first), recorded in the store, its
// failures counted (train.checkpoint_failures) and the time it took set aside from the log
// interval's throughput.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/layout.h"
#include "trainer/train/checkpoint_failures.h"
#include "trainer/train/log_interval.h"
#include "trainer/train/rank_backend.h"
#include "trainer/train/run_recorder.h"

namespace kiln {

class RunCheckpoints {
 public:
  // run_name: names the run's checkpoint folder. saved_step: the step of the checkpoint the
  // run resumed from (0: none). recorder: the first rank's, when the run is recorded.
  RunCheckpoints(const Config& config, const ParallelLayout& layout, Communicator& world, RankBackend& backend,
                 GptModel& model, AdamW& optimizer, std::string run_name, int64_t saved_step,
                 RunRecorder* recorder, LogInterval& interval, std::FILE* out);

  // Writes the checkpoint of `step` (once per step) and records it; returns its path. Every
  // rank calls it at the same step (a sharded optimizer's state is gathered); the first
  // writes. `state`: what the training holds besides the model and optimizer (optimizer
  // steps, data position, learning-rate scale, loss scaler, expert bias); the step, seed,
  // run name, layout and config are filled in here.
  std::string save_checkpoint_at(int64_t step, TrainingState state);
  // The newest checkpoint this run wrote, on the first rank; empty if none.
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  // The first rank: the steps of the run's complete checkpoints on disk, ascending, and the
  // folder of one.
  std::vector<int64_t> complete_steps() const;
  std::string folder_of(int64_t step) const;
  // Every rank, once a rewind restored the checkpoint of `step` at `folder`: the steps after it
  // are written again; the first rank removes the checkpoints past it, of the training the
  // rewind abandoned (drop_checkpoints_after).
  void rewound_to(int64_t step, const std::string& folder);

 private:
  // The first rank, when the checkpoint of `step` could not be written: warns, records an
  // `error` event and returns "" (no checkpoint), or throws once train.checkpoint_failures
  // have failed in a row.
  std::string checkpoint_not_written(int64_t step, const std::string& why);
  bool is_first_rank() const { return world_.rank() == 0; }

  const Config& config_;
  const ParallelLayout& layout_;
  RankCoordinates coordinates_;  // this rank's place in the layout
  Communicator& world_;
  RankBackend& backend_;
  GptModel& model_;
  AdamW& optimizer_;
  std::string run_name_;
  RunRecorder* recorder_;
  LogInterval& interval_;
  std::FILE* out_;
  int64_t saved_step_ = 0;       // the step of the last checkpoint written
  std::string last_checkpoint_;  // its folder, on the first rank, once this run has written one
  CheckpointFailures checkpoint_failures_;  // the first rank's
};

}  // namespace kiln
