#include "trainer/plan/checkpoint_interval.h"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {

CheckpointInterval checkpoint_interval(double checkpoint_s, double mtbf_s, double step_s) {
  for (const auto& [value, name] : {std::pair{checkpoint_s, "the checkpoint's cost"}, std::pair{mtbf_s, "the MTBF"},
                                    std::pair{step_s, "the step time"}})
    if (!(std::isfinite(value) && value > 0)) fail(fmt::format("{} must be a positive number of seconds, not {}", name, value));
  // Daly's first order holds while a checkpoint costs well under the time between failures;
  // past it every interval is a single step.
  const double best_s = checkpoint_s < mtbf_s / 2 ? std::sqrt(2 * checkpoint_s * mtbf_s) - checkpoint_s : step_s;
  CheckpointInterval c;
  c.steps = std::max<int64_t>(1, std::llround(best_s / step_s));
  c.interval_s = static_cast<double>(c.steps) * step_s;
  const double segment = c.interval_s + checkpoint_s;
  c.checkpoint_share = checkpoint_s / segment;
  c.lost_share = std::min(1.0 - c.checkpoint_share, segment / (2 * mtbf_s));
  c.goodput = 1 - c.checkpoint_share - c.lost_share;
  return c;
}

}  // namespace kiln
