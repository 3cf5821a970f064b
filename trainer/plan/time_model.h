// How long a step of a layout takes on a device, and where the time goes: kiln's work per
// micro-batch on the busiest pipeline stage (products at the device's product rate, attention
// at its attention rate, the memory-bound ops at its bandwidth), the transfers kiln does not
// overlap (tensor parallelism's all-reduces, the experts' all-to-alls, the pipeline's sends,
// the part of context parallelism's ring that outlasts the attention it hides behind), the
// pipeline's bubble from the schedule's own arithmetic, then the gradients' reduction over
// the data-parallel ranks and the optimizer. Collectives take the ring's time over the
// link the group spans: within a node, or between nodes. docs/planner.md derives each term.
#pragma once

#include <string>

#include "trainer/config/config.h"
#include "trainer/parallel/layout.h"
#include "trainer/plan/device_spec.h"

namespace kiln {

struct StepPrediction {
  double step_s = 0;
  double compute_s = 0;      // the busiest stage's work over the step's micro-batches
  double tensor_s = 0;       // tensor parallelism's collectives (sequence parallelism's alike)
  double context_s = 0;      // the ring attention's transfers the attention does not hide
  double expert_s = 0;       // the experts' all-to-alls
  double pipeline_s = 0;     // the stages' sends and the bubble
  double data_s = 0;         // the gradients' reduction (and the distributed optimizer's gather)
  double optimizer_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;            // 0 where the device has no BF16 peak
};

// ranks_per_node: how many of the layout's ranks share a node (the device's devices_per_node,
// or fewer on a smaller world); on the CPU they share its cores and rates.
StepPrediction predict_step(const Config& config, const ParallelLayout& layout, const DeviceSpec& device,
                            int ranks_per_node);

// The transfers' time models, exposed for their tests: a ring all-reduce of `bytes` over n
// ranks (2 (n - 1) / n of the bytes each way, 2 (n - 1) steps), and a reduce-scatter or
// all-gather (half of it).
double ring_all_reduce_s(double bytes, int n, const LinkSpec& link);
double ring_gather_s(double bytes, int n, const LinkSpec& link);

}  // namespace kiln
