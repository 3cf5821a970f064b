// DeepSeek's DualPipeV (the V-shaped half of DualPipe, from DeepSeek-V3's training): two
// chunks a rank in a V (PipelinePlacement::v_shape, as ZBV), so the first rank holds the first
// and the last virtual stage. Each rank runs a fixed program of eight phases over m >= 2 pp
// micro-batches, with chunk 0 the first half of the V and chunk 1 the second:
//   1. 2 (pp - s - 1) forwards of chunk 0;
//   2. s + 1 times a forward of chunk 0, then of chunk 1;
//   3. pp - s - 1 times chunk 1's input gradient, a weight gradient, chunk 1's forward;
//   4. m - 2 pp + s + 1 times: chunk 0's forward with chunk 1's backward, then chunk 1's
//      forward with chunk 0's backward (the pairs DualPipe overlaps, here one after the other);
//   5. pp - s - 1 times chunk 1's backward, then chunk 1's forward with chunk 0's backward;
//   6. s + 1 times chunk 1's backward and chunk 0's, split in two from the middle on (an odd
//      rank from its chunk 1, an even one from its chunk 0);
//   7. pp - s - 1 times a weight gradient and chunk 0's input gradient;
//   8. the s + 1 weight gradients left.
// Each chunk's forwards and backwards take its micro-batches in order, and a weight gradient
// the oldest input gradient's. check_pipeline_schedules (pipeline_timeline.h) passes every
// schedule made here.
#pragma once

#include <vector>

#include "trainer/parallel/pipeline_schedule.h"

namespace kiln {

// One schedule per rank, for m micro-batches; fewer than 2 pp are refused in one line.
std::vector<PipelineSchedule> dualpipev_schedules(int pp, int micro_batches);

}  // namespace kiln
