// A checkpoint's tensors copied to host memory at a step boundary, so that a thread of its own
// can write them while training goes on and changes the originals (train.async_checkpoint).
// The memory is the backend's fastest host memory (page-locked on CUDA, so each device copy
// runs at full speed), allocated at the first copy and reused by every later one: one host
// copy of the state for the whole run.
#pragma once

#include <cstddef>

#include "kernels/ops.h"
#include "trainer/checkpoint/checkpoint.h"

namespace kiln {

class HostSnapshot {
 public:
  explicit HostSnapshot(Ops& ops) : ops_(ops) {}
  ~HostSnapshot();
  HostSnapshot(const HostSnapshot&) = delete;
  HostSnapshot& operator=(const HostSnapshot&) = delete;

  // Allocates (and touches) the host memory that copies of `sources` take, before a run's
  // first step as its other memory is, so that the first take pays for the copy alone. Reads
  // nothing.
  void reserve(const CheckpointSources& sources);
  // Reads every source into the host memory, replacing what the last take copied; returns
  // once every copy is there. Nothing may be reading the last take's copies.
  void take(const CheckpointSources& sources);
  // Sources that read the copies, for write_checkpoint: valid until the next take.
  const CheckpointSources& copies() const { return copies_; }
  // The host memory held.
  size_t bytes() const { return capacity_; }

 private:
  Ops& ops_;
  std::byte* memory_ = nullptr;
  size_t capacity_ = 0;
  CheckpointSources copies_;
};

}  // namespace kiln
