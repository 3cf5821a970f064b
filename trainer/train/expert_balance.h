// The experts' side of a step: every MoE layer's routing over the step, summed over the
// ranks (data-parallel replicas add their tokens; pipeline stages each hold their own
// layers), moves the aux-loss-free selection bias and goes to the run store on logged steps;
// under expert parallelism, the time this rank spent trading tokens goes to the step line.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/parallel/communicator.h"
#include "trainer/train/run_recorder.h"

namespace kiln {

class ExpertBalance {
 public:
  // recorder: the first rank's, when the run is recorded; ops: the model's, which hold the
  // layers' loads.
  ExpertBalance(const Config& config, GptModel& model, Ops& ops, Communicator& world, RunRecorder* recorder);

  // After each step of a model with MoE layers: their routing over the step, summed over
  // every rank, moves the selection bias and, on a logged step, goes to the store. Collective
  // over the world when it communicates. Returns this rank's milliseconds in the expert
  // group's exchanges over the step.
  double finish_expert_step(int64_t step, bool logged);
  // Every MoE layer's selection bias (this rank's layers and the others'), by layer: the
  // same on every rank, moved by the world's counts, so rank 0 checkpoints all of it.
  const std::map<int, std::vector<double>>& bias() const { return expert_bias_; }
  // A checkpoint's selection bias (a resume's, a rewind's), handed to this rank's MoE layers;
  // a layer it holds none for starts from none.
  void restore_bias(std::map<int, std::vector<double>> bias);

 private:
  // Hands expert_bias_ to this rank's MoE layers.
  void apply_expert_bias();

  const Config& config_;
  GptModel& model_;
  Ops& ops_;
  Communicator& world_;
  RunRecorder* recorder_;
  std::map<int, std::vector<double>> expert_bias_;
};

}  // namespace kiln
