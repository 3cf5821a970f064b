// The Trainer's checkpoints: writing one (gathered whole from a split model), and what a
// resume from one restores and changes in the schedule.
#include <filesystem>

#include <fmt/core.h>

#include "base/check.h"
#include "base/human_format.h"
#include "base/run_names.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/whole_tensors.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/train/trainer.h"
#include "trainer/util/step_clock.h"

namespace kiln {

std::string Trainer::save_checkpoint_at(int64_t step) {
  const std::string root = run_checkpoint_root(config_.train.checkpoint_dir, run_name_);
  if (saved_step_ == step)
    return checkpoint_failures_.last_failed() ? std::string()
                                              : (std::filesystem::path(root) / fmt::format("step-{:08d}", step)).string();
  const Clock::time_point start = Clock::now();
  // The replicas hold the same model; the optimizer state, when sharded, is gathered to the
  // first rank, which writes it all.
  const OptimizerState optimizer = optimizer_->state_for_checkpoint();
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
    scope.expert_group = first_expert_replica ? expert_group_.get() : nullptr;
    scope.whole_experts = layout_.whole_experts();
    whole = gather_whole_tensors(*model_, optimizer, *ops_, *tensor_group_, scope);
    if (layout_.pp() > 1 && first_replica && tensor_group_->rank() == 0)
      gather_pipeline_stages(whole, *pipeline_group_);
  }
  if (!is_first_rank()) return {};
  TrainingState state;
  state.step = step;
  state.optimizer_steps = optimizer_->steps_taken();
  state.consumed_samples = consumed_samples_;
  state.seed = config_.train.seed;
  state.lr_scale = lr_scale_;
  state.loss_scaler = loss_scaler_.state();
  state.run_name = run_name_;
  state.layout = layout_.name();
  state.config = config_to_json(config_);
  state.expert_bias = expert_bias_;
  const int keep = config_.train.checkpoint_keep;
  WrittenCheckpoint written;
  try {
    written = split ? write_checkpoint(root, state, whole.model_sources(), whole.optimizer_sources(), keep)
                    : save_checkpoint(root, state, *model_, optimizer, *ops_, keep);
  } catch (const Error& e) {
    return checkpoint_not_written(step, e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    return checkpoint_not_written(step, e.what());
  }
  checkpoint_failures_.written();
  const double seconds = seconds_since(start);
  not_training_s_ += seconds;
  fmt::print(out_, "kiln: saved checkpoint {} ({}) in {:.1f} s\n", written.path,
             human_bytes(static_cast<uint64_t>(written.bytes)), seconds);
  std::fflush(out_);
  if (recorder_) recorder_->log_checkpoint(step, written.path, written.bytes, state.layout);
  last_checkpoint_ = written.path;
  return written.path;
}

namespace {

// Whether a resumed run trains with the config its checkpoint holds: the alert hook aside,
// which comes from the command line alone (a checkpoint's is dropped).
bool same_training_config(nlohmann::json now, nlohmann::json saved) {
  for (nlohmann::json* config : {&now, &saved})
    if (config->contains("alerts")) (*config)["alerts"].erase("command");
  return now == saved;
}

}  // namespace

void Trainer::warn_of_schedule_changes(const nlohmann::json& checkpoint_config, const std::string& resume) {
  TrainConfig before;
  try {
    before = config_from_json(checkpoint_config).train;
  } catch (const Error&) {
    return;  // a config older kiln wrote and this one refuses: nothing to compare with
  }
  fit_to_steps(before);
  const std::vector<std::string> changes = schedule_changes(before, config_.train);
  if (changes.empty()) return;
  std::string list;
  for (const std::string& change : changes) list += (list.empty() ? "" : ", ") + change;
  const double now = learning_rate(config_.train, first_step_) * lr_scale_;
  const double had = learning_rate(before, first_step_) * lr_scale_;
  const std::string lr = fmt::format("{:.3g}", now) == fmt::format("{:.3g}", had)
                             ? fmt::format("stays {:.3g}", now)
                             : fmt::format("is {:.3g}, where the checkpoint's schedule had {:.3g}", now, had);
  fmt::print(out_, "kiln: warning: resuming {} with a changed schedule ({}): the learning rate at step {} {}\n",
             resume, list, first_step_, lr);
}

void Trainer::resume_from(const std::string& resume, RecordOptions& recording) {
  const Checkpoint checkpoint(resume);
  checkpoint.check_model(config_to_json(config_)["model"]);
  const TrainingState& state = checkpoint.state();
  if (state.step >= config_.train.steps)
    fail(fmt::format("checkpoint {} is at step {}, and train.steps={} leaves nothing to train; "
                     "raise train.steps",
                     resume, state.step, config_.train.steps));
  checkpoint.restore(*model_, *optimizer_, *ops_);
  first_step_ = state.step + 1;
  saved_step_ = state.step;
  consumed_samples_ = state.consumed_samples;
  lr_scale_ = state.lr_scale;
  loss_scaler_.restore(state.loss_scaler);
  for (const auto& [layer, bias] : state.expert_bias)
    if (!config_.model.moe.is_moe_layer(layer) ||
        bias.size() != static_cast<size_t>(config_.model.moe.num_experts))
      fail(fmt::format("checkpoint {} holds a selection bias for layer {} of {} experts, which "
                       "this model's moe section does not have", resume, layer, bias.size()));
  expert_bias_ = state.expert_bias;
  apply_expert_bias();
  // The run goes on under its own name (and in its own checkpoint folder) unless the user
  // names a new one: a fork of the run.
  if (!recording.name_given) {
    try {
      kiln::check_run_name(state.run_name);
    } catch (const Error& e) {
      fail("checkpoint " + resume + " records a run name kiln cannot use as a folder (" + e.what() +
           "); resume it with --name NAME");
    }
    run_name_ = recording.name = state.run_name;
  }
  if (recording.name != state.run_name) {
    recording.parent_name = state.run_name;
    recording.parent_step = state.step;
  }
  // A step-0 checkpoint (an import) has no schedule under way to change.
  if (state.step > 0) warn_of_schedule_changes(state.config, resume);
  recording.resumed_from = resume;
  recording.resumed_step = state.step;
  recording.resumed_unchanged = same_training_config(config_to_json(config_), state.config);
}

}  // namespace kiln
