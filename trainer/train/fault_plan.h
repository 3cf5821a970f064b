// Fault rehearsal (docs/alerts.md): KILN_FAULTS plants faults in a real run so each alert
// rule, and the hook behind it, can be seen to fire before a real fault does. Items,
// separated by commas:
//   nan@STEP              the loss of STEP is NaN on every rank (the real NaN path follows)
//   spike@STEP[xFACTOR]   the loss reported at STEP is FACTOR (10) times what it was, the first
//                         time the process trains STEP: a rewind past the spike (which trains
//                         STEP again on other data) leaves it behind, as it would a real one
//   slow@RANK:MS          that rank works MS ms longer every step: a straggler the others wait for
//   stall@STEP:SECONDS    every rank stops that long in STEP
//   throughput@STEP:MS    every rank works MS ms longer every step from STEP on
//   checkpoint@STEP:SECONDS  the checkpoint of STEP stops that long mid-write, after its first
//                         tensor: a window in which to kill the run while it writes
//   checkpoint-error@STEP:RANK  that rank fails with an error in the checkpoint of STEP: the
//                         writing rank mid-write, its temporary folder begun (a write error,
//                         which train.checkpoint_failures weighs), any other as its part begins
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct Fault {
  enum class Kind { Nan, Spike, Slow, Stall, Throughput, Checkpoint, CheckpointError };
  Kind kind = Kind::Nan;
  int64_t step = 0;  // nan, spike, stall, checkpoint: the step; throughput: the first step
  int rank = 0;      // slow, checkpoint-error
  double amount = 0; // spike: the factor; slow, throughput: ms; stall, checkpoint: seconds
  bool planted = false;  // spike: reported once
};

class FaultPlan {
 public:
  FaultPlan() = default;
  // Throws kiln::Error ("KILN_FAULTS: ...") naming the item it cannot read.
  static FaultPlan parse(std::string_view text);
  // KILN_FAULTS from the environment; none when unset or empty.
  static FaultPlan from_environment();

  bool empty() const { return faults_.empty(); }
  // "a NaN loss at step 5, rank 1 working 40 ms longer every step"
  std::string describe() const;
  // The loss as `step` reports it (a spike's step once).
  double loss_at(int64_t step, double loss);
  // Milliseconds `rank` spends idle in its work at `step`.
  double delay_ms(int64_t step, int rank) const;
  // Seconds the checkpoint of `step` stops mid-write.
  double checkpoint_pause_s(int64_t step) const;
  // Whether `rank` fails with an error in the checkpoint of `step`.
  bool fails_in_checkpoint(int64_t step, int rank) const;

 private:
  std::vector<Fault> faults_;
};

}  // namespace kiln
