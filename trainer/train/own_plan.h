// A run's own plan: what `kiln plan --this-layout` predicts for its layout on its device (the
// step time, docs/planner.md) and the memory the planner sizes for the rank, printed beside
// the memory the rank allocated and recorded with the run, so the dashboard and the terminal
// UI show planned beside measured.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>

#include "kernels/ops.h"
#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/layout.h"

namespace kiln {

struct OwnPlan {
  double step_s = 0;
  size_t planned_bytes = 0;
  size_t allocated_bytes = 0;
};

// The planner's view of rank `rank` of this run, which trains on `threads` CPU threads (its
// share of the machine) or a GPU: its layout's predicted step on this backend's device, and the
// memory it plans for the rank beside what the rank allocated. Nothing on a GPU the planner's
// table does not know, or for a layout the planner cannot take.
std::optional<OwnPlan> plan_own_run(const Config& config, const ParallelLayout& layout, int rank, int world_size,
                                    Ops& ops, const GptModel& model, const AdamW& optimizer, int threads);
// "kiln: planned 12.3 ms a step and 63.1 MiB on rank 0 (kiln plan); measured memory ..."
void print_plan(std::FILE* out, const OwnPlan& plan, int rank);

}  // namespace kiln
