#include "trainer/train/own_plan.h"

#include <fmt/core.h>

#include <algorithm>

#include "base/check.h"
#include "base/human_format.h"
#include "trainer/plan/device_spec.h"
#include "trainer/plan/rank_memory.h"
#include "trainer/plan/time_model.h"
#include "trainer/train/backend.h"

namespace kiln {

std::optional<OwnPlan> plan_own_run(const Config& config, const ParallelLayout& layout, int rank, int world_size,
                                    Ops& ops, const GptModel& model, const AdamW& optimizer, int threads) {
  const std::optional<DeviceSpec> device = device_for_backend(ops.name(), ops.device() == Device::Cuda);
  if (!device) return std::nullopt;
  // The plan compares with the allocation exactly when it takes the op workspace the
  // backend reserved (cuDNN's may be larger than the planner's estimate).
  OwnPlan plan;
  size_t workspace = 0;
  for (const ArenaSize& a : model.memory()) {
    plan.allocated_bytes += a.bytes;
    if (a.name == "op workspace") workspace = a.bytes;
  }
  plan.allocated_bytes += optimizer.bytes();
  const int per_node = std::clamp(ranks_here(world_size), 1, std::min(world_size, device->devices_per_node));
  // A CPU run is planned on the threads it has, its share of a machine that other runs use
  // too, not on the cores it would have alone.
  Config planned = config;
  if (!device->gpu) planned.backend.threads = threads;
  try {
    plan.step_s = predict_step(planned, layout, *device, per_node).step_s;
    plan.planned_bytes = plan_rank_memory(config, layout, rank, ops.device(), ops, workspace).total();
  } catch (const Error&) {
    return std::nullopt;  // a layout the planner cannot take says nothing; the run goes on
  }
  return plan;
}

void print_plan(std::FILE* out, const OwnPlan& p, int rank) {
  std::string measured = "measured memory " + human_bytes(p.allocated_bytes);
  if (p.allocated_bytes != p.planned_bytes)
    measured += fmt::format(", {} {} than planned",
                            human_bytes(std::max(p.allocated_bytes, p.planned_bytes) -
                                        std::min(p.allocated_bytes, p.planned_bytes)),
                            p.allocated_bytes > p.planned_bytes ? "more" : "less");
  fmt::print(out, "kiln: planned {:.1f} ms a step and {} on rank {} (kiln plan); {}\n", p.step_s * 1e3,
             human_bytes(p.planned_bytes), rank, measured);
}

}  // namespace kiln
