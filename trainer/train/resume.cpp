#include "trainer/train/resume.h"

#include <fmt/core.h>

#include "base/check.h"
#include "base/run_names.h"
#include "trainer/optim/lr_schedule.h"

namespace kiln {

namespace {

// Whether a resumed run trains with the config its checkpoint holds: the alert hook aside,
// which comes from the command line alone (a checkpoint's is dropped).
bool same_training_config(nlohmann::json now, nlohmann::json saved) {
  for (nlohmann::json* config : {&now, &saved})
    if (config->contains("alerts")) (*config)["alerts"].erase("command");
  return now == saved;
}

// Says which schedule keys a resumed run changed and what that does to the learning rate at
// its first step.
void warn_of_schedule_changes(const Config& config, const TrainingState& state, const std::string& resume,
                              std::FILE* out) {
  const nlohmann::json& checkpoint_config = state.config;
  const int64_t first_step = state.step + 1;
  TrainConfig before;
  try {
    before = config_from_json(checkpoint_config).train;
  } catch (const Error&) {
    return;  // a config older kiln wrote and this one refuses: nothing to compare with
  }
  fit_to_steps(before);
  const std::vector<std::string> changes = schedule_changes(before, config.train);
  if (changes.empty()) return;
  std::string list;
  for (const std::string& change : changes) list += (list.empty() ? "" : ", ") + change;
  const double now = learning_rate(config.train, first_step) * state.lr_scale;
  const double had = learning_rate(before, first_step) * state.lr_scale;
  const std::string lr = fmt::format("{:.3g}", now) == fmt::format("{:.3g}", had)
                             ? fmt::format("stays {:.3g}", now)
                             : fmt::format("is {:.3g}, where the checkpoint's schedule had {:.3g}", now, had);
  fmt::print(out, "kiln: warning: resuming {} with a changed schedule ({}): the learning rate at step {} {}\n",
             resume, list, first_step, lr);
}

}  // namespace

TrainingState restore_checkpoint(const Checkpoint& checkpoint, const Config& config, GptModel& model,
                                 AdamW& optimizer, Ops& ops) {
  const std::string& path = checkpoint.path();
  checkpoint.check_model(config_to_json(config)["model"]);
  const TrainingState& state = checkpoint.state();
  // A checkpoint's adapters go on only under the LoRA settings they were trained with; a
  // checkpoint without adapters starts them fresh (docs/lora.md#checkpoints).
  const nlohmann::json saved_lora = state.config.value("finetune", nlohmann::json::object()).value("lora", nlohmann::json::object());
  if (saved_lora.value("rank", 0) > 0 && saved_lora != config_to_json(config)["finetune"]["lora"])
    fail(fmt::format("checkpoint {} holds LoRA adapters trained with finetune.lora {}; resume it with the same "
                     "settings (or export it, merged, and import that)",
                     path, saved_lora.dump()));
  checkpoint.restore(model, optimizer, ops);
  for (const auto& [layer, bias] : state.expert_bias)
    if (layer >= config.model.block_count() || !config.model.moe.is_moe_layer(layer) ||
        bias.size() != static_cast<size_t>(config.model.moe.num_experts))
      fail(fmt::format("checkpoint {} holds a selection bias for layer {} of {} experts, which "
                       "this model's moe section does not have", path, layer, bias.size()));
  return state;
}

TrainingState resume_training(const std::string& resume, const Config& config, GptModel& model, AdamW& optimizer,
                              Ops& ops, RecordOptions& recording, std::FILE* out) {
  const Checkpoint checkpoint(resume);
  if (checkpoint.state().step >= config.train.steps)
    fail(fmt::format("checkpoint {} is at step {}, and train.steps={} leaves nothing to train; "
                     "raise train.steps",
                     resume, checkpoint.state().step, config.train.steps));
  const TrainingState state = restore_checkpoint(checkpoint, config, model, optimizer, ops);
  // The run goes on under its own name (and in its own checkpoint folder) unless the user
  // names a new one: a fork of the run.
  if (!recording.name_given) {
    try {
      kiln::check_run_name(state.run_name);
    } catch (const Error& e) {
      fail("checkpoint " + resume + " records a run name kiln cannot use as a folder (" + e.what() +
           "); resume it with --name NAME");
    }
    recording.name = state.run_name;
  }
  if (recording.name != state.run_name) {
    recording.parent_name = state.run_name;
    recording.parent_step = state.step;
  }
  // A step-0 checkpoint (an import) has no schedule under way to change.
  if (state.step > 0) warn_of_schedule_changes(config, state, resume, out);
  recording.resumed_from = resume;
  recording.resumed_step = state.step;
  recording.resumed_step_seconds = state.step_seconds;
  recording.resumed_unchanged = same_training_config(config_to_json(config), state.config);
  return state;
}

}  // namespace kiln
