// A run's checkpoints as it trains: the one of a step written once (gathered whole from a
// split model, by every rank together, written by the first), recorded in the store, its
// failures counted (train.checkpoint_failures) and the time it held the training set aside
// from the log interval's throughput. Under train.async_checkpoint an interval's checkpoint is
// copied to host memory at the step boundary and written on a thread of its own while the
// training goes on, one at a time, and recorded once it is in place.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "trainer/checkpoint/background_writer.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/host_snapshot.h"
#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/layout.h"
#include "trainer/train/checkpoint_failures.h"
#include "trainer/train/fault_plan.h"
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

  // Writes the checkpoint of `step` (once per step) and records it; returns its path once it
  // is written, after a write in the background has ended. Every rank calls it at the same
  // step (a sharded optimizer's state is gathered); the first writes. `state`: what the
  // training holds besides the model and optimizer (optimizer steps, data position,
  // learning-rate scale, loss scaler, expert bias); the step, seed, run name, layout and config
  // are filled in here.
  std::string save_checkpoint_at(int64_t step, TrainingState state);
  // An interval's checkpoint of `step`: under train.async_checkpoint copied to host memory and
  // written in the background (a write still in flight is waited for first, and the wait
  // said), else save_checkpoint_at. Every rank calls it at the same step.
  void start_checkpoint_at(int64_t step, TrainingState state);
  // The first rank, at every step boundary: prints and records a write in the background
  // that has ended, without waiting for one that has not.
  void note_finished_write();
  // Waits for a write in the background to end, and prints and records it.
  void finish_writing();
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
  // Every rank, at `step`: what the first rank writes from (empty elsewhere), the model's
  // tensors and `optimizer` (AdamW::state_for_checkpoint's, whose memory the caller holds),
  // gathered whole from a split model; copied into the snapshot when `to_host`, else read
  // as they are written.
  CheckpointSources sources_at(int64_t step, const OptimizerState& optimizer, bool to_host);
  // The checkpoint's write, for the first rank: the run's state filled in.
  std::function<WrittenCheckpoint()> write_of(int64_t step, TrainingState state, CheckpointSources sources) const;
  // The first rank: waits for a write in the background before the checkpoint of `step`,
  // saying how long when it had not ended.
  void wait_for_write(int64_t step);
  // The first rank: prints and records how a write went; returns its path, or "" when it was
  // not written.
  std::string record(const CheckpointOutcome& outcome, bool in_background);
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
  FaultPlan faults_;             // KILN_FAULTS: a checkpoint that stops mid-write
  int64_t saved_step_ = 0;       // the step of the last checkpoint written or being written
  std::string last_checkpoint_;  // its folder, on the first rank, once this run has written one
  CheckpointFailures checkpoint_failures_;  // the first rank's
  HostSnapshot snapshot_;        // the first rank's copy of an unsplit model's state
  BackgroundWriter writer_;      // after the snapshot: a write reading it ends before it goes
  double background_stall_s_ = 0;  // how long the write in flight held the training (its snapshot)
};

}  // namespace kiln
