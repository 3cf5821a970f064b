#include "trainer/train/run_checkpoints.h"

#include <filesystem>
#include <utility>

#include <fmt/core.h>

#include "base/check.h"
#include "base/human_format.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/whole_tensors.h"
#include "trainer/util/step_clock.h"

namespace kiln {

RunCheckpoints::RunCheckpoints(const Config& config, const ParallelLayout& layout, Communicator& world,
                               RankBackend& backend, GptModel& model, AdamW& optimizer, std::string run_name,
                               int64_t saved_step, RunRecorder* recorder, LogInterval& interval, std::FILE* out)
    : config_(config),
      layout_(layout),
      coordinates_(layout.coordinates(world.rank())),
      world_(world),
      backend_(backend),
      model_(model),
      optimizer_(optimizer),
      run_name_(std::move(run_name)),
      recorder_(recorder),
      interval_(interval),
      out_(out),
      saved_step_(saved_step) {}

std::string RunCheckpoints::save_checkpoint_at(int64_t step, TrainingState state) {
  const std::string root = run_checkpoint_root(config_.train.checkpoint_dir, run_name_);
  if (saved_step_ == step)
    return checkpoint_failures_.last_failed() ? std::string() : folder_of(step);
  const Clock::time_point start = Clock::now();
  // The replicas hold the same model; the optimizer state, when sharded, is gathered to the
  // first rank, which writes it all.
  const OptimizerState optimizer = optimizer_.state_for_checkpoint();
  saved_step_ = step;
  // A model split over a tensor group, pipeline stages or an expert group is written whole:
  // the first replica's tensor groups gather their pieces, and its stages send theirs to
  // the first.
  const bool split = layout_.splits_model();
  // The experts come from the first replica of each expert group, where the optimizer
  // state holds them whole.
  WholeTensors whole;
  const bool first_replica = coordinates_.dp == 0 && coordinates_.cp == 0;
  const bool first_expert_replica = layout_.expert_coordinates(world_.rank()).edp == 0;
  if (split && (first_replica || first_expert_replica)) {
    GatherScope scope;
    scope.dense = first_replica;
    scope.expert_group = first_expert_replica ? backend_.expert_group() : nullptr;
    scope.whole_experts = layout_.whole_experts();
    whole = gather_whole_tensors(model_, optimizer, backend_.ops(), backend_.tensor_group(), scope);
    if (layout_.pp() > 1 && first_replica && backend_.tensor_group().rank() == 0)
      gather_pipeline_stages(whole, backend_.pipeline_group());
  }
  if (!is_first_rank()) return {};
  state.step = step;
  state.seed = config_.train.seed;
  state.run_name = run_name_;
  state.layout = layout_.name();
  state.config = config_to_json(config_);
  const int keep = config_.train.checkpoint_keep;
  WrittenCheckpoint written;
  try {
    written = split ? write_checkpoint(root, state, whole.model_sources(), whole.optimizer_sources(), keep)
                    : save_checkpoint(root, state, model_, optimizer, backend_.ops(), keep);
  } catch (const Error& e) {
    return checkpoint_not_written(step, e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    return checkpoint_not_written(step, e.what());
  }
  checkpoint_failures_.written();
  const double seconds = seconds_since(start);
  interval_.set_aside(seconds);
  fmt::print(out_, "kiln: saved checkpoint {} ({}) in {:.1f} s\n", written.path,
             human_bytes(static_cast<uint64_t>(written.bytes)), seconds);
  std::fflush(out_);
  if (recorder_) recorder_->log_checkpoint(step, written.path, written.bytes, state.layout, seconds);
  last_checkpoint_ = written.path;
  return written.path;
}

std::vector<int64_t> RunCheckpoints::complete_steps() const {
  return complete_checkpoint_steps(run_checkpoint_root(config_.train.checkpoint_dir, run_name_));
}

std::string RunCheckpoints::folder_of(int64_t step) const {
  return (std::filesystem::path(run_checkpoint_root(config_.train.checkpoint_dir, run_name_)) /
          fmt::format("step-{:08d}", step))
      .string();
}

void RunCheckpoints::rewound_to(int64_t step, const std::string& folder) {
  saved_step_ = step;
  if (!is_first_rank()) return;
  last_checkpoint_ = folder;
  // The training goes on either way: what is left is said, for a resume to be pointed past it.
  try {
    drop_checkpoints_after(run_checkpoint_root(config_.train.checkpoint_dir, run_name_), step);
  } catch (const std::exception& e) {
    fmt::print(out_, "kiln: warning: the checkpoints past step {} could not all be removed ({}); resume from {}\n",
               step, e.what(), folder);
    std::fflush(out_);
  }
}

std::string RunCheckpoints::checkpoint_not_written(int64_t step, const std::string& why) {
  const std::string warning = checkpoint_failures_.failed(step, why, config_.train.checkpoint_failures);
  fmt::print(out_, "kiln: warning: {}\n", warning);
  std::fflush(out_);
  if (recorder_) recorder_->log_event(store::event_kind::kError, warning, step);
  return {};
}

}  // namespace kiln
