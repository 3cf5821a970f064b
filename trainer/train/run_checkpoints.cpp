#include "trainer/train/run_checkpoints.h"

#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/core.h>

#include "base/check.h"
#include "base/human_format.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/whole_tensors.h"
#include "trainer/train/sharded_units.h"
#include "trainer/util/step_clock.h"

namespace kiln {
namespace {

// Runs `then` once the write has read its first tensor: mid-write, its temporary folder begun.
void after_first_tensor(CheckpointSources& sources, std::function<void()> then) {
  if (sources.model.empty()) return;
  TensorSource& first = sources.model.front();
  first.read = [read = std::move(first.read), then = std::move(then)](void* host) {
    read(host);
    then();
  };
}

}  // namespace

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
      faults_(FaultPlan::from_environment()),
      saved_step_(saved_step),
      snapshot_(backend.ops()) {
  // The host copy an unsplit model's interval checkpoints are written from is allocated
  // before step 1, as the run's other memory is, and said (an interval a command sets later
  // allocates it at its first checkpoint).
  if (config_.train.async_checkpoint && config_.train.checkpoint_interval > 0 && is_first_rank() &&
      !layout_.splits_model()) {
    snapshot_.reserve(checkpoint_sources(model_, optimizer_.state_to_restore(), backend_.ops()));
    fmt::print(out_, "kiln: asynchronous checkpoints copy the state into {} of host memory, held for the run\n",
               human_bytes(snapshot_.bytes()));
  }
}

std::string RunCheckpoints::save_checkpoint_at(int64_t step, TrainingState state) {
  if (is_first_rank()) wait_for_write(step);
  if (saved_step_ == step) return checkpoint_failures_.last_failed() ? std::string() : folder_of(step);
  const Clock::time_point start = Clock::now();
  // The replicas hold the same model (sharded values gathered whole for the write); the
  // optimizer state, when sharded, is gathered to the first rank, which writes it all (from
  // memory this holds until the write ends).
  const WholeValues values(model_.parameters(), backend_.shard_group(), backend_.expert_data_group(), backend_.ops());
  const OptimizerState optimizer = optimizer_.state_for_checkpoint();
  CheckpointSources sources = sources_at(step, optimizer, false);
  if (!is_first_rank()) return {};
  CheckpointOutcome outcome = write_outcome(step, write_of(step, std::move(state), std::move(sources)));
  // All the time the training was held, the gathering too.
  outcome.seconds = seconds_since(start);
  if (outcome.error.empty()) interval_.set_aside(outcome.seconds);
  return record(outcome, false);
}

void RunCheckpoints::start_checkpoint_at(int64_t step, TrainingState state) {
  if (!config_.train.async_checkpoint) {
    save_checkpoint_at(step, std::move(state));
    return;
  }
  if (saved_step_ == step) return;
  if (is_first_rank()) wait_for_write(step);
  const Clock::time_point start = Clock::now();
  const WholeValues values(model_.parameters(), backend_.shard_group(), backend_.expert_data_group(), backend_.ops());
  const OptimizerState optimizer = optimizer_.state_for_checkpoint();
  CheckpointSources sources = sources_at(step, optimizer, true);
  if (!is_first_rank()) return;
  writer_.start(step, write_of(step, std::move(state), std::move(sources)));
  // The training was held for the copy alone: the write goes on beside the next steps.
  const double seconds = seconds_since(start);
  background_stall_s_ = seconds;
  interval_.set_aside(seconds);
  fmt::print(out_, "kiln: checkpoint step {} snapshot in {:.2f} s, writing in the background\n", step, seconds);
  std::fflush(out_);
}

void RunCheckpoints::note_finished_write() {
  if (const std::optional<CheckpointOutcome> outcome = writer_.finished()) record(*outcome, true);
}

void RunCheckpoints::finish_writing() {
  if (const std::optional<CheckpointOutcome> outcome = writer_.wait()) record(*outcome, true);
}

CheckpointSources RunCheckpoints::sources_at(int64_t step, const OptimizerState& optimizer, bool to_host) {
  saved_step_ = step;
  // KILN_FAULTS' checkpoint-error@STEP:RANK on a rank that does not write: it fails as its
  // part begins, while the others gather or write.
  if (!is_first_rank() && faults_.fails_in_checkpoint(step, world_.rank()))
    fail(fmt::format("KILN_FAULTS: rank {} fails in the checkpoint of step {}", world_.rank(), step));
  if (layout_.splits_model()) {
    // A model split over a tensor group, pipeline stages or an expert group is written whole:
    // the first replica's tensor groups gather their pieces, and its stages send theirs to
    // the first. The experts come from the first replica of each expert group, where the
    // optimizer state holds them whole. The gathered tensors are a host copy already.
    WholeTensors whole;
    const bool first_replica = coordinates_.dp == 0 && coordinates_.cp == 0;
    const bool first_expert_replica = layout_.expert_coordinates(world_.rank()).edp == 0;
    if (first_replica || first_expert_replica) {
      GatherScope scope;
      scope.dense = first_replica;
      scope.expert_group = first_expert_replica ? backend_.expert_group() : nullptr;
      scope.whole_experts = layout_.whole_experts();
      whole = gather_whole_tensors(model_, optimizer, backend_.ops(), backend_.tensor_group(), scope);
      if (layout_.pp() > 1 && first_replica && backend_.tensor_group().rank() == 0)
        gather_pipeline_stages(whole, backend_.pipeline_group());
    }
    if (!is_first_rank()) return {};
    return {whole.model_sources(), whole.optimizer_sources()};
  }
  if (!is_first_rank()) return {};
  CheckpointSources sources = checkpoint_sources(model_, optimizer, backend_.ops());
  if (!to_host) return sources;
  snapshot_.take(sources);
  return snapshot_.copies();
}

std::function<WrittenCheckpoint()> RunCheckpoints::write_of(int64_t step, TrainingState state,
                                                            CheckpointSources sources) const {
  state.step = step;
  state.seed = config_.train.seed;
  state.run_name = run_name_;
  state.layout = layout_.name();
  state.config = config_to_json(config_);
  // KILN_FAULTS' checkpoint@STEP:SECONDS: the write stops after its first tensor, its
  // temporary folder half written; checkpoint-error@STEP:RANK on the writing rank: the write
  // fails there, as a disk that fails mid-write would.
  if (const double pause = faults_.checkpoint_pause_s(step); pause > 0)
    after_first_tensor(sources, [pause] { std::this_thread::sleep_for(std::chrono::duration<double>(pause)); });
  if (faults_.fails_in_checkpoint(step, world_.rank()))
    after_first_tensor(sources, [step] {
      fail(fmt::format("KILN_FAULTS: rank 0's write fails mid-checkpoint at step {}", step));
    });
  return [root = run_checkpoint_root(config_.train.checkpoint_dir, run_name_), state = std::move(state),
          sources = std::move(sources), keep = config_.train.checkpoint_keep] {
    return write_checkpoint(root, state, sources.model, sources.optimizer, keep);
  };
}

void RunCheckpoints::wait_for_write(int64_t step) {
  note_finished_write();
  if (!writer_.in_flight()) return;
  const Clock::time_point start = Clock::now();
  const std::optional<CheckpointOutcome> outcome = writer_.wait();
  const double waited = seconds_since(start);
  interval_.set_aside(waited);
  fmt::print(out_, "kiln: checkpoint step {} waited {:.1f} s for the checkpoint of step {} to be written (one is "
                   "written at a time)\n",
             step, waited, outcome->step);
  record(*outcome, true);
}

std::string RunCheckpoints::record(const CheckpointOutcome& outcome, bool in_background) {
  if (!outcome.error.empty()) return checkpoint_not_written(outcome.step, outcome.error);
  checkpoint_failures_.written();
  const WrittenCheckpoint& written = outcome.written;
  fmt::print(out_, "kiln: saved checkpoint {} ({}) in {:.1f} s{}\n", written.path,
             human_bytes(static_cast<uint64_t>(written.bytes)), outcome.seconds,
             in_background ? " in the background" : "");
  std::fflush(out_);
  // The store keeps how long training stood still for it: a background write's snapshot.
  if (recorder_)
    recorder_->log_checkpoint(outcome.step, written.path, written.bytes, layout_.name(),
                              in_background ? background_stall_s_ : outcome.seconds);
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
  // A write in flight ends first, so that no checkpoint past the rewind is published after it.
  finish_writing();
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
