// A run's own plan: what `kiln plan --this-layout` predicts for its layout on its device (the
// step time, docs/planner.md) and the memory the planner sizes for the rank, printed beside
// the memory the rank allocated and recorded with the run, so the dashboard and the terminal
// UI show planned beside measured.
#include <fmt/core.h>

#include <algorithm>

#include "base/check.h"
#include "base/human_format.h"
#include "trainer/plan/device_spec.h"
#include "trainer/plan/rank_memory.h"
#include "trainer/plan/time_model.h"
#include "trainer/train/backend.h"
#include "trainer/train/trainer.h"

namespace kiln {

std::optional<Trainer::OwnPlan> Trainer::plan_own_run() const {
  const std::optional<DeviceSpec> device = device_for_backend(ops_->name(), ops_->device() == Device::Cuda);
  if (!device) return std::nullopt;
  // The plan compares with the allocation exactly when it takes the op workspace the
  // backend reserved (cuDNN's may be larger than the planner's estimate).
  OwnPlan plan;
  size_t workspace = 0;
  for (const ArenaSize& a : model_->memory()) {
    plan.allocated_bytes += a.bytes;
    if (a.name == "op workspace") workspace = a.bytes;
  }
  plan.allocated_bytes += optimizer_->bytes();
  const int per_node = std::clamp(ranks_here(world_.size()), 1, std::min(world_.size(), device->devices_per_node));
  // A CPU run is planned on the threads it has, its share of a machine that other runs use
  // too, not on the cores it would have alone.
  Config planned = config_;
  if (!device->gpu) planned.backend.threads = core_share_ ? core_share_->threads() : threads_;
  try {
    plan.step_s = predict_step(planned, layout_, *device, per_node).step_s;
    plan.planned_bytes = plan_rank_memory(config_, layout_, world_.rank(), ops_->device(), *ops_, workspace).total();
  } catch (const Error&) {
    return std::nullopt;  // a layout the planner cannot take says nothing; the run goes on
  }
  return plan;
}

void Trainer::print_plan() const {
  if (!own_plan_) return;
  const OwnPlan& p = *own_plan_;
  std::string measured = "measured memory " + human_bytes(p.allocated_bytes);
  if (p.allocated_bytes != p.planned_bytes)
    measured += fmt::format(", {} {} than planned",
                            human_bytes(std::max(p.allocated_bytes, p.planned_bytes) -
                                        std::min(p.allocated_bytes, p.planned_bytes)),
                            p.allocated_bytes > p.planned_bytes ? "more" : "less");
  fmt::print(out_, "kiln: planned {:.1f} ms a step and {} on rank {} (kiln plan); {}\n", p.step_s * 1e3,
             human_bytes(p.planned_bytes), world_.rank(), measured);
}

}  // namespace kiln
