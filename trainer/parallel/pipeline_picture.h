// A pipeline's step drawn as text, from its schedules played out (pipeline_timeline.h) with a
// forward, an input gradient and a weight gradient each taking one unit of time (a whole
// backward two): a row per rank, a cell per unit, each cell a pass and its micro-batch:
//   F forward, B backward (both units), I input gradient, W weight gradient;
//   upper case for a rank's first chunk, lower case for its others (":c" names the chunk
//   where a rank holds more than two); dots where the rank idles.
// `kiln plan --timeline` prints it; docs/parallelism.md shows each schedule's.
#pragma once

#include <string>
#include <vector>

#include "trainer/parallel/pipeline_schedule.h"

namespace kiln {

// The drawing, its legend and its bubble, one line each; schedules that cannot run are
// refused as check_pipeline_schedules refuses them.
std::string draw_pipeline(const std::vector<PipelineSchedule>& ranks, const PipelinePlacement& placement,
                          int micro_batches);

}  // namespace kiln
