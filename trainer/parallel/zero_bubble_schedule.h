// The zero-bubble family's schedules (Qi et al., "Zero Bubble Pipeline Parallelism", 2024):
// each backward split into the input's gradient (B), which the stage before waits for, and the
// weights' (W), which can wait and fills what would be the bubble.
//
// Every rank's schedule is made at once by playing the step out in equal time slots (a
// forward, a B and a W each take one): in each slot each rank runs, of the passes whose inputs
// are ready, a B first; else a forward, if it holds fewer activations than its limit; else a
// W, which frees one. Among passes of a kind, the deeper virtual stage, then the earlier
// micro-batch, go first. An activation is held from a pass's forward until its W.
//   ZB-H1: the ranks of 1F1B, rank s holding at most pp - s micro-batches (1F1B's own peak),
//     the W's filling 1F1B's cool-down;
//   ZBV: two chunks a rank in a V (PipelinePlacement::v_shape), each rank holding at most
//     2 pp chunks' activations: pp whole micro-batches', 1F1B's first rank's peak.
// check_pipeline_schedules (pipeline_timeline.h) passes every schedule made here.
#pragma once

#include <vector>

#include "trainer/parallel/pipeline_schedule.h"

namespace kiln {

enum class ZeroBubble { H1, V };

PipelinePlacement zero_bubble_placement(ZeroBubble kind, int pp);

// One schedule per rank, for m micro-batches.
std::vector<PipelineSchedule> zero_bubble_schedules(ZeroBubble kind, int pp, int micro_batches);

}  // namespace kiln
