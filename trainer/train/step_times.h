// One step's loss and where its time went, as the step runner measures it and the alerts,
// the metrics rows and the progress line read it.
#pragma once

namespace kiln {

// Milliseconds, host clock; the device is waited for at each phase's end on steps that are
// logged, so the split is the device's too.
struct StepTimes {
  double loss = 0;
  double data_ms = 0;
  double fwd_ms = 0;
  double bwd_ms = 0;
  double comm_ms = 0;  // summing the gradients over the data-parallel ranks
  double a2a_ms = 0;   // of fwd_ms and bwd_ms, the expert group's token exchanges
};

}  // namespace kiln
