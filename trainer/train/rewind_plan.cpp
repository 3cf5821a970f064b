#include "trainer/train/rewind_plan.h"

#include <fmt/core.h>

namespace kiln {

RewindChoice choose_rewind(int64_t done, int64_t most, int64_t spike_step, const std::vector<int64_t>& checkpoint_steps) {
  RewindChoice choice;
  if (done >= most) {
    choice.outcome = RewindChoice::Outcome::LimitReached;
    return choice;
  }
  bool found = false;
  for (const int64_t step : checkpoint_steps) {
    if (step >= spike_step || (found && step <= choice.to_step)) continue;
    choice.to_step = step;
    found = true;
  }
  if (!found) return choice;
  choice.outcome = RewindChoice::Outcome::Rewind;
  choice.number = done + 1;
  return choice;
}

SkippedData skip_after(int64_t consumed_samples, int64_t global_batch, int64_t batches) {
  return {consumed_samples / global_batch + 1, batches, consumed_samples + batches * global_batch};
}

std::string skipped_text(const SkippedData& skipped) {
  if (skipped.batches == 0) return "skipping no data";
  if (skipped.batches == 1) return fmt::format("skipping batch {} of the data", skipped.first_batch);
  return fmt::format("skipping batches {}-{} of the data", skipped.first_batch,
                     skipped.first_batch + skipped.batches - 1);
}

std::string rewind_message(int64_t from_step, int64_t to_step, int64_t spike_step, const SkippedData& skipped,
                           int64_t number, int64_t most) {
  return fmt::format("from step {} back to step {} past the loss spike at step {}, {}; rewind {} of {}", from_step,
                     to_step, spike_step, skipped_text(skipped), number, most);
}

std::string no_rewind_message(const RewindChoice& choice, int64_t spike_step, int64_t most) {
  if (choice.outcome == RewindChoice::Outcome::LimitReached)
    return fmt::format("no rewind: rewind limit reached ({} of alerts.max_rewinds={} done); the run trains on past "
                       "the loss spike at step {}",
                       most, most, spike_step);
  return fmt::format("no rewind: the run has no checkpoint before the loss spike at step {} "
                     "(train.checkpoint_interval writes them); it trains on",
                     spike_step);
}

}  // namespace kiln
