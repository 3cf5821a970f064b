// AdamW over every parameter in one op call: F32 master weights (the parameters
// themselves when they are F32 or F64; a copy when they are BF16/F16), first and second
// moments laid out like the flat gradient buffer, decoupled weight decay on matrices and
// embeddings only, global-norm clipping before the update, and skipping of steps whose
// gradients overflowed (fp16 loss scaling).
//
// With a shard group of several ranks it is Megatron's distributed optimizer (ZeRO-1): the
// flat buffers are cut into one contiguous shard per rank; a rank keeps master weights and
// moments for its shard alone, receives the sum of every rank's gradients for its shard
// (reduce-scatter), updates it, and all-gathers the updated parameters.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/memory/arena.h"
#include "trainer/model/parameters.h"
#include "trainer/parallel/communicator.h"

namespace kiln {

struct OptimizerStep {
  double grad_norm = 0;  // of the true (unscaled) gradients, before clipping
  bool skipped = false;  // the gradients held an Inf or NaN: nothing was updated
};

// The whole optimizer state, laid out like the flat gradient buffer: what a checkpoint holds.
struct OptimizerState {
  Tensor master, exp_avg, exp_avg_sq;
  bool master_copy = false;        // master is a copy (mixed precision), not the parameters
  std::unique_ptr<Arena> memory;   // owns the tensors when they are not the optimizer's own
};

class AdamW {
 public:
  // shard_group: the data-parallel ranks that share the state (null or one rank: no sharding);
  // the parameter buffers must be allocated with that many shards. tensor_group: the ranks
  // the parameters are split over (tensor parallelism), for the gradient norm: split
  // parameters count on every rank, whole ones on the group's first rank only.
  // pipeline_group: the stages that hold the rest of the model, whose gradients the norm
  // takes in (a copy of another stage's parameter counts there alone).
  AdamW(const TrainConfig& train, ParameterSet& params, Ops& ops,
        Communicator* shard_group = nullptr, Communicator* tensor_group = nullptr,
        Communicator* pipeline_group = nullptr);

  // Optimizer state per parameter element (of the shard), for sizing a run before it allocates.
  static size_t state_bytes_per_element(DType value_dtype);

  bool sharded() const { return shards_ > 1; }
  // Sharded: this rank's shard of the flat gradients becomes the sum over the group's ranks.
  void reduce_scatter_gradients();

  // The gradients hold loss_scale times the true gradients. Unscales, clips to
  // train.clip_grad, and updates every parameter with learning rate lr, unless the
  // gradients are not finite. Sharded, a collective over the group.
  OptimizerStep step(double lr, double loss_scale = 1.0);

  int64_t steps_taken() const { return step_; }
  size_t bytes() const { return state_.bytes(); }

  // The whole state for a checkpoint: views of this optimizer's own tensors or, sharded,
  // gathered from every rank to the group's rank 0 (a collective; the other ranks get an
  // empty state).
  OptimizerState state_for_checkpoint();
  // Where a checkpoint's state is loaded before restored() takes it.
  OptimizerState state_to_restore();
  // After the state was loaded: a sharded optimizer keeps its shard of it; the bias
  // correction goes on from `steps`.
  void restored(const OptimizerState& state, int64_t steps);

 private:
  OptimizerState whole_buffers() const;
  double sum_squares(const Tensor& grads);

  TrainConfig train_;
  ParameterSet& params_;
  Ops& ops_;
  Communicator* group_;
  Communicator* tensor_group_;
  Communicator* pipeline_group_;
  // Ranges of the shard whose gradients count in this rank's part of the norm, unless all
  // of them do.
  std::vector<std::pair<int64_t, int64_t>> norm_ranges_;
  bool norm_all_ = true;
  int shards_ = 1;
  bool mixed_ = false;  // BF16/F16 parameters: the F32 master weights are a copy
  int64_t begin_ = 0, end_ = 0;  // this rank's shard of the flat buffers
  Arena state_{"optimizer"};
  Tensor master_, m_, v_, grad_shard_, segments_;
  int64_t step_ = 0;
};

}  // namespace kiln
