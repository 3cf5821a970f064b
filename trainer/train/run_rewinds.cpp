#include "trainer/train/run_rewinds.h"

#include <cstring>
#include <vector>

#include <fmt/core.h>

namespace kiln {
namespace {

// The first rank's text on every rank: its length, then its bytes in 8-byte words.
std::string share_text(Communicator& world, std::string text) {
  if (world.size() == 1) return text;
  int64_t size = static_cast<int64_t>(text.size());
  world.broadcast(Tensor{&size, DType::I64, {1}}, 0);
  std::vector<int64_t> words(static_cast<size_t>((size + 7) / 8));
  if (words.empty()) return {};
  std::memcpy(words.data(), text.data(), text.size());  // the first rank's; the others' are empty
  world.broadcast(Tensor{words.data(), DType::I64, {static_cast<int64_t>(words.size())}}, 0);
  return std::string(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(size));
}

}  // namespace

RunRewinds::RunRewinds(const Config& config, Communicator& world, const RunCheckpoints& checkpoints,
                       RunRecorder* recorder, std::FILE* out)
    : config_(config), world_(world), checkpoints_(checkpoints), recorder_(recorder), out_(out) {
  if (recorder_ && config_.alerts.rewinds()) done_ = recorder_->rewind_count();
}

std::string RunRewinds::choose(int64_t spike_step, int64_t step) {
  std::string folder;
  if (is_first_rank()) {
    const RewindChoice choice =
        choose_rewind(done_, config_.alerts.max_rewinds, spike_step, checkpoints_.complete_steps());
    if (choice.outcome == RewindChoice::Outcome::Rewind) {
      folder = checkpoints_.folder_of(choice.to_step);
    } else {
      const std::string why = no_rewind_message(choice, spike_step, config_.alerts.max_rewinds);
      fmt::print(out_, "kiln: alert action: {}\n", why);
      std::fflush(out_);
      if (recorder_) recorder_->log_event(store::event_kind::kStatus, why, step);
    }
  }
  return share_text(world_, std::move(folder));
}

void RunRewinds::record(int64_t spike_step, int64_t from_step, int64_t to_step, const std::string& checkpoint,
                        const SkippedData& skipped) {
  if (!is_first_rank()) return;
  ++done_;
  const int64_t most = config_.alerts.max_rewinds;
  fmt::print(out_, "kiln: alert action: rewind to step {} (checkpoint {}), {}; rewind {} of {}\n", to_step, checkpoint,
             skipped_text(skipped), done_, most);
  std::fflush(out_);
  if (!recorder_) return;
  store::Rewind rewind;
  rewind.number = static_cast<int>(done_);
  rewind.spike_step = spike_step;
  rewind.from_step = from_step;
  rewind.to_step = to_step;
  rewind.checkpoint = checkpoint;
  rewind.first_skipped_batch = skipped.first_batch;
  rewind.skipped_batches = skipped.batches;
  rewind.message = rewind_message(from_step, to_step, spike_step, skipped, done_, most);
  try {
    recorder_->log_rewind(std::move(rewind));
  } catch (const std::exception& e) {
    fmt::print(out_, "kiln: warning: the run store could not record the rewind: {}\n", e.what());
  }
}

}  // namespace kiln
