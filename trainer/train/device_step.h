// A training step of a model whole on one rank whose device work waits for nothing on the
// host from its first op to its last, so that it can be captured once as a CUDA graph and
// replayed every step (docs/gpu.md#cuda-graphs):
//
//   zero_grad; for each micro-batch: its tokens copied in from page-locked staging, forward
//   with the per-token losses kept on the device (and copied aside), backward; then the
//   optimizer's norm, clip and update from its device scalars (trainer/optim/adamw.h).
//
// The host stages the step's micro-batches and the optimizer's values (learning rate, loss
// scale) before it runs, and reads the losses, the gradient norm and the skip after: the same
// numbers, summed in the same order, as the step that runs op by op (Trainer::train_step and
// AdamW::step), so a replayed step trains and reports the same bits.
//
// A capture is redone when what it baked in changes: the backward's loss weight (an fp16
// run's loss scale moves it). Everything else that changes between steps (the batch, the
// learning rate, the step count) is read from memory each replay.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "trainer/data/token_batch.h"
#include "trainer/memory/arena.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"

namespace kiln {

// Steps a run takes op by op before it captures one: the first load kernels, choose the
// matrix products' algorithms and plan attention, work that a capture cannot hold.
constexpr int kGraphWarmupSteps = 2;

class DeviceStep {
 public:
  // A step of `accum` micro-batches of the model's micro-batch x model.seq_len tokens, with the
  // document resets `documents` asks for. Allocates its staging (page-locked) and its copy of
  // the losses now, before step 1. The model must be whole on this rank and the optimizer
  // must not sum the norm over ranks.
  DeviceStep(GptModel& model, AdamW& optimizer, Ops& ops, int accum, const DocumentOptions& documents);
  ~DeviceStep();
  DeviceStep(const DeviceStep&) = delete;
  DeviceStep& operator=(const DeviceStep&) = delete;

  // Before the step: micro-batch `micro`'s tokens, targets and resets (null where documents
  // asks for none) into its staging, checked as GptModel::set_batch checks them.
  void stage(int micro, const int32_t* tokens, const int32_t* targets, const DocumentResets& resets);

  struct Result {
    double nats = 0;  // the per-token losses summed, micro-batch by micro-batch (0 where masked)
    OptimizerStep update;
  };
  // Runs the staged step at learning rate lr, each token's loss weighted by dloss (the loss
  // scale over the step's tokens), the gradients divided by gradient_divisor before the update
  // (StepRunner::gradient_divisor: the loss scale, and the share of the tokens trained). Captured: into a graph the first time (and whenever dloss
  // changes), replayed after; nullopt, with why_not(), when the step cannot be captured (it
  // then ran nothing, and the caller runs it op by op). Not captured: queued op by op.
  std::optional<Result> run(double lr, double gradient_divisor, double dloss, bool captured);
  // Why the last capture failed.
  const std::string& why_not() const { return why_not_; }
  // The bytes it allocated: its copy of the losses on the device, and the page-locked staging.
  size_t device_bytes() const { return memory_.bytes(); }
  size_t staging_bytes() const { return staging_bytes_; }

 private:
  // The step's device work, queued (or captured).
  void queue(double dloss);
  Result finish();
  // Micro-batch micro's staging for tokens (0), targets (1), positions (2), attention starts (3).
  int32_t* staged(int micro, int part) const;

  GptModel& model_;
  AdamW& optimizer_;
  Ops& ops_;
  int accum_;
  int64_t rows_, columns_;  // a micro-batch's b and t
  bool positions_, starts_;  // whether the staging holds document resets
  Arena memory_{"graph step"};
  Tensor losses_;  // [accum, b * t]: each micro-batch's per-token losses
  int32_t* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  std::unique_ptr<OpGraph> graph_;
  double graph_dloss_ = 0;  // what graph_ was captured with
  std::string why_not_;
};

}  // namespace kiln
