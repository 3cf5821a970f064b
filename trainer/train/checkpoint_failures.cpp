#include "trainer/train/checkpoint_failures.h"

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {

std::string CheckpointFailures::failed(int64_t step, const std::string& why, int limit) {
  ++in_a_row_;
  const std::string what = fmt::format("the checkpoint of step {} was not written ({})", step, why);
  if (in_a_row_ >= limit)
    fail(fmt::format("{}: {} checkpoint{} in a row could not be written (train.checkpoint_failures={}), so the "
                     "run stops; free space where train.checkpoint_dir points, or point it elsewhere, and resume "
                     "from the last checkpoint written",
                     what, in_a_row_, in_a_row_ == 1 ? "" : "s", limit));
  return fmt::format("{}; training goes on and tries again at the next checkpoint ({} failure{} in a row; {} stop "
                     "the run, train.checkpoint_failures)",
                     what, in_a_row_, in_a_row_ == 1 ? "" : "s", limit);
}

}  // namespace kiln
