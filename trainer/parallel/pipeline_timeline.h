// A step of a pipeline played out from its schedules (pipeline_schedule.h), one per rank:
// each rank runs its steps in order, a step starting once the rank is free and what it needs
// has finished (a forward, the stage before's forward of its micro-batch; a backward or an
// input gradient, its own forward and the stage after's backward; a weight gradient, its own
// input gradient). Sends cost nothing: this is the schedule's own bubble, which the trainer
// prints and the planner charges.
//
// It is also the check a schedule passes before it runs (check_pipeline_schedules): every
// (micro-batch, virtual stage) runs its forward and its backward (whole, or split in two)
// exactly once on the rank that holds the stage; the ranks' orders together run to the end;
// and each link between two ranks takes its activations and gradients in the same order at
// both ends, which NCCL, matching by order alone, needs.
#pragma once

#include <string>
#include <vector>

#include "trainer/parallel/pipeline_schedule.h"

namespace kiln {

// The time of each pass over a whole stage's layers; a chunk's take a chunk's share.
// A backward is the input's gradient and the weights' together.
struct PipelineCosts {
  double forward = 1;
  double input_gradient = 1;
  double weight_gradient = 1;
};

struct PipelineTimeline {
  double step = 0;            // from the first start to the last finish
  std::vector<double> busy;   // per rank, the time it computes
  std::vector<std::vector<double>> starts;  // per rank, when each of its steps starts
  // The fraction of the step the ranks idle, on average.
  double bubble() const;
};

// Plays the step out; `error` (when not null) gets why it cannot run to the end (one line),
// and the timeline is then empty.
PipelineTimeline play_pipeline(const std::vector<PipelineSchedule>& ranks, const PipelinePlacement& placement,
                               int micro_batches, const PipelineCosts& costs = {}, std::string* error = nullptr);

// Fails, in one line naming the rank and the step, unless the schedules can run (above).
void check_pipeline_schedules(const std::vector<PipelineSchedule>& ranks, const PipelinePlacement& placement,
                              int micro_batches);

// The bubble of Megatron's 1F1B (vpp = 1) or interleaved schedule over pp ranks, from the
// schedules themselves.
double pipeline_bubble(int pp, int vpp, int micro_batches);

}  // namespace kiln
