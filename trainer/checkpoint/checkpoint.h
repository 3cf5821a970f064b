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
#include <string>
#include <vector>

#include "trainer/checkpoint/safetensors.h"
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
};

struct WrittenCheckpoint {
  std::string path;
  int64_t bytes = 0;
};

// Writes the checkpoint of `state.step` under root (created if missing), points `latest` at
// it, then removes the oldest checkpoints beyond `keep` (0 keeps all). optimizer: the whole
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

// Writes a checkpoint from tensor sources rather than a live model (what `kiln import`
// does), with save_checkpoint's layout and crash safety.
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
  std::string path_;
  TrainingState state_;
  std::unique_ptr<SafetensorsFile> model_;
  std::unique_ptr<SafetensorsFile> optimizer_;
};

// What --resume names: a checkpoint folder; a folder of checkpoints (its `latest`); or
// "latest", the newest checkpoint of any run under checkpoint_dir. Returns the checkpoint's
// path, or fails saying what was looked for.
std::string find_checkpoint(const std::string& spec, const std::string& checkpoint_dir);

// The folder of one run's checkpoints: checkpoint_dir/run_name, for a run name that
// store::check_run_name accepts (so the folder is always directly under checkpoint_dir);
// anything else is a kiln::Error.
std::string run_checkpoint_root(const std::string& checkpoint_dir, const std::string& run_name);

// The run config a checkpoint was written with, read from its state.json alone (the files
// are checked when the checkpoint is opened for restoring).
nlohmann::json checkpoint_config(const std::string& path);

}  // namespace kiln
