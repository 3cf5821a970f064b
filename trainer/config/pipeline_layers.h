// How a config's layers and micro-batches may split over a pipeline: the arithmetic config
// validation checks a run against, and the pipeline (trainer/parallel/pipeline_schedule.h) and
// the rank builder use. It lives with the config, not the parallel code, so the arrow between
// the two folders points one way: trainer/parallel includes trainer/config (layout.h takes a
// ParallelConfig), never the reverse.
#pragma once

#include <vector>

namespace kiln {

// pp, vpp and the micro-batches are each >= 1; refused with the numbers.
void check_pipeline_sizes(int pp, int vpp, int micro_batches);

// Layers per virtual stage (pp * vpp of them, in model order). first and last (0: even)
// give the first and the last virtual stage their own counts, as Megatron's
// --decoder-first/last-pipeline-num-layers; the others split the rest evenly. Refused, with
// the arithmetic, when they cannot.
std::vector<int> pipeline_layers(int n_layer, int pp, int vpp, int first, int last);

}  // namespace kiln
