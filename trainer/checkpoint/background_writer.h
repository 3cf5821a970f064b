// One checkpoint at a time written on a thread of its own (train.async_checkpoint): the
// training thread starts a write, asks at each step boundary whether it has finished, and
// waits for it before it starts the next or ends the run. How a write went comes back to the
// training thread, which prints and records it: the writing thread itself prints nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>

#include "trainer/checkpoint/checkpoint.h"

namespace kiln {

struct CheckpointOutcome {
  int64_t step = 0;
  WrittenCheckpoint written;  // when it was written
  std::string error;          // why it was not written; "" when it was
  double seconds = 0;         // how long the write took
};

// Runs `write`, the checkpoint of `step`, on this thread and says how it went: a checkpoint
// that cannot be written (a full disk, a folder refused) is an outcome with its error, not an
// exception.
CheckpointOutcome write_outcome(int64_t step, const std::function<WrittenCheckpoint()>& write);

class BackgroundWriter {
 public:
  BackgroundWriter() = default;
  // A write begun is finished before its writer goes, and the process with it.
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Starts writing the checkpoint of `step` by `write` on a thread of its own. One is
  // written at a time: a write in flight is waited for (wait()) first.
  void start(int64_t step, std::function<WrittenCheckpoint()> write);
  // A write was started and its outcome not yet taken.
  bool in_flight() const { return write_.valid(); }
  // The outcome of the write in flight once it has ended, without waiting; none while it
  // runs, or when none is in flight.
  std::optional<CheckpointOutcome> finished();
  // Waits for the write in flight to end and returns its outcome; none when none is in flight.
  std::optional<CheckpointOutcome> wait();

 private:
  std::future<CheckpointOutcome> write_;
};

}  // namespace kiln
