// Checkpoints: everything a run needs to continue exactly where it was.
//
//   <root>/step-00000100/model.safetensors      every parameter, in the model's dtype
//                        optimizer.safetensors  AdamW's moments (and F32 master weights under
//                                               mixed precision), one tensor per parameter
//                        state.json             step, data position, seed, learning-rate
//                                               scale, loss scaler, run name, layout, config
//                        manifest.json          size and SHA-256 of each file above
//   <root>/latest                               the name of the newest complete checkpoint
//
// Checkpoints are the user's alone: folders 0700 and files 0600, made without following a link
// planted at their names, into a run folder that must be the user's own real folder. A resumed
// run takes its config from a checkpoint, so it trusts only one that is the user's own and no one
// else's to write, and never runs the alert hook a checkpoint holds (docs/security.md).
//
// A checkpoint is written into a temporary folder beside its final name, every file
// fsynced, and renamed into place only when whole; a crash mid-write leaves the previous
// checkpoints and `latest` as they were. Tensors are stored per parameter, by name, so a
// checkpoint does not depend on the flat-buffer layout of the run that wrote it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainer/checkpoint/safetensors.h"
#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/loss_scaler.h"

namespace kiln {

// What a checkpoint holds besides tensors.
struct TrainingState {
  int64_t step = 0;             // optimizer steps done: the run continues at step + 1
  int64_t optimizer_steps = 0;  // AdamW's count for bias correction (skipped steps excluded)
  int64_t consumed_samples = 0; // training samples read so far: the data position
  uint64_t seed = 0;            // the data order and initialisation derive from it alone
  double lr_scale = 1;          // `kiln runs set train.lr...` so far
  LossScaler::State loss_scaler;
  std::string run_name;
  std::string layout;
  nlohmann::json config;        // the resolved run config
  // Aux-loss-free balancing's selection bias of each MoE layer (docs/moe.md): empty when
  // moe.bias_update_rate is 0.
  std::map<int, std::vector<double>> expert_bias;
  // The seconds the run had spent in its steps up to this one (goodput's, docs/resilience.md);
  // nullopt in a checkpoint written before kiln measured them.
  std::optional<double> step_seconds;
};

struct WrittenCheckpoint {
  std::string path;
  int64_t bytes = 0;
};

// Writes the checkpoint of `state.step` under root (created 0700 if missing, else refused
// unless check_run_folder passes), points `latest` at it, then removes the oldest checkpoints
// beyond `keep` (0 keeps all). A step folder already at its name (a run resumed from an earlier
// step) is replaced, once the new one is whole, if it is the user's own real folder. optimizer: the whole
// state (AdamW::state_for_checkpoint).
WrittenCheckpoint save_checkpoint(const std::string& root, const TrainingState& state,
                                  const GptModel& model, const OptimizerState& optimizer,
                                  Ops& ops, int keep);

// One tensor of a checkpoint file and how to get its bytes, one tensor at a time, so a
// writer never holds more than one tensor in host memory.
struct TensorSource {
  TensorInfo info;
  std::function<void(void* host)> read;  // fills info's bytes
};

// The tensors of a checkpoint of `model`, each copied from the device when its turn comes:
// the parameters (model.safetensors) and the optimizer state (optimizer.safetensors) by name.
struct CheckpointSources {
  std::vector<TensorSource> model;
  std::vector<TensorSource> optimizer;
};
CheckpointSources checkpoint_sources(const GptModel& model, const OptimizerState& optimizer, Ops& ops);

// Writes a checkpoint from tensor sources rather than a live model (what `kiln import` and a
// checkpoint written in the background do), with save_checkpoint's layout and crash safety.
WrittenCheckpoint write_checkpoint(const std::string& root, const TrainingState& state,
                                   const std::vector<TensorSource>& model,
                                   const std::vector<TensorSource>& optimizer, int keep);

// A checkpoint whose files were all checked against its manifest. A missing, truncated or
// altered file is an error naming it.
class Checkpoint {
 public:
  explicit Checkpoint(std::string path);

  const std::string& path() const { return path_; }
  const TrainingState& state() const { return state_; }

  // Refuses a checkpoint of another model shape: every model.* key must match.
  void check_model(const nlohmann::json& model_config) const;
  // Loads parameters and optimizer state (converting the dtype when the run's differs); every
  // rank of a sharded optimizer loads the whole state and keeps its shard.
  void restore(GptModel& model, AdamW& optimizer, Ops& ops) const;
  // Loads the parameters alone, for inference: the F32 master weights when the checkpoint
  // has them and the model computes in F32, else the saved parameters, converted.
  void load_parameters(GptModel& model, Ops& ops) const;
  // The weights file, checked (for tools that read tensors by name: `kiln export`).
  const SafetensorsFile& model_file() const { return *model_; }

 private:
  // Whether the optimizer file holds F32 master weights (of the parameters that train).
  bool has_master_weights(const ParameterSet& params) const;
  std::string path_;
  TrainingState state_;
  std::unique_ptr<SafetensorsFile> model_;
  std::unique_ptr<SafetensorsFile> optimizer_;
};

// What --resume or --checkpoint names: a checkpoint folder; a folder of checkpoints (its
// `latest`: a regular file, not a link, of a few bytes, naming a step folder in it); or
// "latest", the newest checkpoint among this user's runs under checkpoint_dir (another user's
// run there is never picked). Returns the checkpoint's path, or fails saying what was looked for.
std::string find_checkpoint(const std::string& spec, const std::string& checkpoint_dir);

// find_checkpoint for a run that continues from it, which trusts what it reads: the checkpoint
// folder and its files (and, when found through them, the run folder and its `latest`) must be
// the user's own, not links, and not writable by the group or others; else a kiln::Error that
// names the path and what to do.
std::string find_checkpoint_to_resume(const std::string& spec, const std::string& checkpoint_dir);

// Refuses (kiln::Error naming it and what to do) a run folder kiln is to write checkpoints into
// that is there but is not the user's own real folder, only theirs to write: a link planted at
// its name would send the checkpoints elsewhere. A run checks its folder before its first step.
void check_run_folder(const std::string& root);

// The steps of the complete checkpoints (step folders with their manifest) under a run's
// folder, ascending; none when the folder is not there.
std::vector<int64_t> complete_checkpoint_steps(const std::string& root);

// A rewind past a loss spike went back to the checkpoint of `step` under root: the step
// folders past it, of the training it abandoned, are removed and `latest` names it again, so a
// run resumed later continues the training that went on, not the one that spiked.
void drop_checkpoints_after(const std::string& root, int64_t step);

// The folder of one run's checkpoints: checkpoint_dir/run_name, for a run name that
// kiln::check_run_name accepts (so the folder is always directly under checkpoint_dir);
// anything else is a kiln::Error.
std::string run_checkpoint_root(const std::string& checkpoint_dir, const std::string& run_name);

// The state a checkpoint was written with (its step, run, config...), read from its state.json
// alone (the files are checked when the checkpoint is opened for restoring).
TrainingState checkpoint_state(const std::string& path);
// Its run config.
nlohmann::json checkpoint_config(const std::string& path);

// The config a resumed or forked run trains with: the checkpoint's, with this command's --set
// overrides on top, without the checkpoint's alert hook. A hook runs a command as whoever
// resumes, and a checkpoint is a file (its manifest's SHA-256 has no key), so a resumed run
// runs only a hook its own command line gives (a --set here, or a --config file, which
// replaces the checkpoint's config whole).
struct ResumedConfig {
  Config config;
  std::string dropped_hook;  // the checkpoint's alerts.command, not run and not kept; "" if none
};
ResumedConfig resumed_config(const std::string& checkpoint, const std::vector<std::string>& overrides);

}  // namespace kiln
