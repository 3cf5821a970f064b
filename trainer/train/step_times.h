// One step's loss and where its time went, as the step runner measures it and the alerts,
// the metrics rows and the progress line read it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln {

// Milliseconds, host clock; the device is waited for at each phase's end on steps that are
// logged, so the split is the device's too.
struct StepTimes {
  double loss = 0;            // the mean over the step's trained tokens
  int64_t trained_tokens = 0;  // the global batch's targets not masked (a loss mask, eod_mask_loss)
  double data_ms = 0;
  double fwd_ms = 0;
  double bwd_ms = 0;
  double comm_ms = 0;  // summing the gradients over the data-parallel ranks
  double a2a_ms = 0;   // of fwd_ms and bwd_ms, the expert group's token exchanges
  // Of fwd_ms and bwd_ms, waiting for sharded units' gathers and reductions that the
  // computation did not hide; only where the parameters are sharded in units.
  std::optional<double> shard_ms;
  // Of fwd_ms and bwd_ms, a pipeline stage waiting to receive its neighbours' activations and
  // gradients (the bubble, with the transfers); only under pipeline parallelism.
  std::optional<double> pipe_ms;
  // Multi-token prediction (model.mtp_depth): each depth's loss, the mean over its own targets.
  std::vector<double> mtp_losses;
};

}  // namespace kiln
