// Runs a sweep's points as `kiln train` child processes, K at a time (kiln sweep,
// docs/sweeps.md). Each child is the kiln binary (`kiln train --ranks R` for R ranks), in its
// own process group so a Ctrl-C at the terminal reaches the sweep alone; its output goes to
// its log file, which must not be a link another user planted, and it inherits no descriptor
// of the sweep's but stdin (/dev/null), stdout and stderr (launch/launcher.h). SIGINT or
// SIGTERM to the sweep forwards one SIGTERM to every child (each stops at its next step
// boundary, checkpointing when it keeps checkpoints), waits for them, and launches nothing
// more.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::launch {

struct SweepTask {
  int64_t point = 0;
  std::string run_name;
  std::string params;                   // "train.lr=1e-3 model.d_model=128", for the lines it prints
  std::vector<std::string> train_args;  // after `kiln train`
  std::string log_path;
};

struct SweepSlots {
  int parallel = 1;
  int ranks = 1;  // > 1: each point's kiln train starts this many ranks (--ranks)
  // Each slot's CUDA_VISIBLE_DEVICES; empty: the children see what the sweep sees.
  std::vector<std::string> devices;
};

// The visible GPUs split evenly among `parallel` slots, as CUDA_VISIBLE_DEVICES lists (the
// sweep's own CUDA_VISIBLE_DEVICES, else 0..gpus-1). Refuses more slots than GPUs.
std::vector<std::string> split_devices(int gpus, int parallel);

struct SweepOutcome {
  int64_t launched = 0;
  int64_t finished = 0;
  bool interrupted = false;
};

// Launches the tasks in order as children of `kiln` (the binary), at most slots.parallel at a
// time; `launching` runs just before each launch (the sweep records the point's run),
// `finished` after each child exits with its exit status (128 + signal when a signal ended
// it). A point that cannot start is a kiln::Error ("sweep: point N: ...").
SweepOutcome run_sweep_tasks(const std::string& kiln, const std::vector<SweepTask>& tasks, const SweepSlots& slots,
                             const std::function<void(const SweepTask&)>& launching,
                             const std::function<void(const SweepTask&, int exit_status)>& finished);

}  // namespace kiln::launch
