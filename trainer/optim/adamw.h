// AdamW over every parameter in one op call: F32 master weights (the parameters
// themselves when they are F32 or F64; a copy when they are BF16/F16), first and second
// moments laid out like the flat gradient buffer, decoupled weight decay on matrices and
// embeddings only, global-norm clipping before the update, and skipping of steps whose
// gradients overflowed (fp16 loss scaling).
//
// With a shard group of several ranks it is Megatron's distributed optimizer (ZeRO-1): the
// flat buffers are cut into one contiguous shard per rank; a rank keeps master weights and
// moments for its shard alone, receives the sum of every rank's gradients for its shard
// (reduce-scatter), updates it, and all-gathers the updated parameters. Under expert
// parallelism the experts' region of the buffers is sharded the same way over the replicas
// that hold the same experts (the expert-data-parallel group).
//
// The step's scalars (kernels/optimizer_scalars.h) live in device memory: the host writes the
// learning-rate terms, the loss scale and the clip threshold to page-locked memory, the step
// copies them in, sums the squared gradient norm and computes the clip factor and the skip
// on the device, and AdamW reads them there. Only the norm's sums over ranks pass through the
// host, so a one-rank step waits for nothing until the host reads the norm back, and can be
// captured once and replayed (CUDA graphs, trainer/train/device_step.h).
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

// The ranks an optimizer works with; a null member: no such group.
struct OptimizerGroups {
  // The data-parallel ranks that share the state (null or one rank: no sharding); the
  // parameter buffers must be allocated with that many shards.
  Communicator* shard = nullptr;
  // parallel.shard_group: the ranks at this one's place in the other shard groups, which
  // hold the same shards and sum their gradients with it (null: none).
  Communicator* shard_replicas = nullptr;
  // Sharded, the ranks that share the state of the experts' region: the expert-data-parallel
  // group (its region allocated with that many shards).
  Communicator* expert_shard = nullptr;
  // The ranks the parameters are split over (tensor parallelism), for the gradient norm:
  // split parameters count on every rank, whole ones on the group's first rank only.
  Communicator* tensor = nullptr;
  // The stages that hold the rest of the model, whose gradients the norm takes in (a copy
  // of another stage's parameter counts there alone).
  Communicator* pipeline = nullptr;
  // The expert group whose ranks hold the rest of each layer's experts, for the norm.
  Communicator* expert = nullptr;
  // parallel.etp=1 under tp > 1: the experts are whole on each tensor rank, not split over
  // the tensor group, and count in the norm on every rank that holds them.
  bool whole_experts = false;
};

class AdamW {
 public:
  AdamW(const TrainConfig& train, ParameterSet& params, Ops& ops, const OptimizerGroups& groups = {});
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // Optimizer state per parameter element (of the shard), for sizing a run before it allocates.
  static size_t state_bytes_per_element(DType value_dtype);
  // The bytes an optimizer over these parameters and groups allocates, from the constructor's
  // own layout of its state, allocating nothing (the parameters need only be laid out).
  static size_t planned_bytes(const ParameterSet& params, const OptimizerGroups& groups);

  bool sharded() const { return sharded_; }
  // Sharded: this rank's shard of the flat gradients becomes the sum over the group's ranks.
  void reduce_scatter_gradients();
  // With the parameters sharded in units (ParameterSet::shard_units), where this rank's
  // shard of a part of a unit's summed gradients is added up over the step's micro-batches
  // (trainer/train/sharded_units.h), and the start of a step that zeroes them all.
  Tensor unit_gradient_shard(size_t unit, UnitPart part = UnitPart::Dense) const;
  void zero_gradient_shards();

  // The gradients hold loss_scale times the true gradients. Unscales, clips to
  // train.clip_grad, and updates every parameter with learning rate lr, unless the
  // gradients are not finite. Sharded, a collective over the group. prepare, queue_update
  // and finish in turn.
  OptimizerStep step(double lr, double loss_scale = 1.0);
  // The step in three parts, for a step captured once and replayed (CUDA graphs):
  // this step's host values, written to page-locked memory;
  void prepare(double lr, double loss_scale);
  // the rest, queued: the values copied in, the gradient norm, the clip and the update. It
  // waits for the device only where the norm is summed over ranks (norm_over_ranks());
  void queue_update();
  // and, once the device has run it, the norm and the skip read back (waits for the device).
  OptimizerStep finish();
  // Whether queue_update sums the norm over ranks on the host, or moves shards between them.
  bool norm_over_ranks() const;

  int64_t steps_taken() const { return step_; }
  size_t bytes() const { return state_.bytes(); }

  // The whole state for a checkpoint: views of this optimizer's own tensors or, sharded,
  // gathered from every rank to the group's rank 0 (a collective; the other ranks get an
  // empty state). The experts' region is gathered to the first rank of each expert-data
  // group, whose state holds it whole (and the rest only on the first rank).
  OptimizerState state_for_checkpoint();
  // Where a checkpoint's state is loaded before restored() takes it.
  OptimizerState state_to_restore();
  // After the state was loaded: a sharded optimizer keeps its shard of it; the bias
  // correction goes on from `steps`.
  void restored(const OptimizerState& state, int64_t steps);

 private:
  // A part of the flat buffers sharded over one group: the whole buffer, or its dense and
  // experts' regions under the distributed optimizer, or a part of a unit when sharded in
  // units.
  struct Region {
    Communicator* group = nullptr;  // the ranks that share it (null: this rank's alone)
    int unit = -1;                  // sharded in units: the unit, and which part of it
    UnitPart part = UnitPart::Dense;
    int64_t first = 0, last = 0;    // the region in the flat buffers
    int64_t begin = 0, end = 0;     // this rank's shard of it
    int64_t state_at = 0;           // where the shard starts in the state tensors
    Tensor segments;                // the adamw op's table over the shard
    Tensor state(const Tensor& t) const { return t.slice(state_at, state_at + end - begin); }
  };
  struct NormRange {
    int64_t first, last;  // in the state tensors
    bool expert;
  };

  // Where the state goes: the regions, each one's segment table, the norm's ranges.
  struct StateLayout {
    std::vector<Region> regions;
    std::vector<std::vector<int64_t>> tables;
    std::vector<NormRange> norm_ranges;
    bool norm_all = true;
    int64_t size = 0;  // elements of each state tensor: the rank's shards of the regions
  };
  static StateLayout lay_out(const ParameterSet& params, const OptimizerGroups& groups);
  // Takes the state tensors from `state` (both passes of its arena take the same): master
  // weights when mixed, the moments, the gradient shard when sharded, the segment tables,
  // the step's scalars.
  struct StateTensors {
    Tensor master, m, v, grad_shard, scalars;
  };
  static StateTensors take_state(Arena& state, StateLayout& layout, bool mixed, bool sharded, DType dtype);

  OptimizerState whole_buffers() const;
  // Whether region i is a part of a unit's (ParameterSet::units()).
  bool unit_region(size_t i) const { return regions_[i].unit >= 0; }
  // The values region i updates: its shard of the flat values, or of the value shards; and
  // the region whole, where it is whole (not a unit's under sharded values).
  Tensor region_values(size_t i) const;
  Tensor region_whole_values(size_t i) const;
  // The scalar `which` (OptimizerScalar) of scalars_, as a one-value tensor.
  Tensor scalar(int64_t which) const { return scalars_.slice(which, which + 1); }
  // The squared norm's parts summed over the ranks that hold the rest of the gradients, through
  // the host (waits for the device), back into the scalars.
  void sum_norm_over_ranks();

  TrainConfig train_;
  ParameterSet& params_;
  Ops& ops_;
  OptimizerGroups groups_;
  std::vector<Region> regions_;
  // Ranges of the state whose gradients count in this rank's part of the norm, unless all
  // of them do.
  std::vector<NormRange> norm_ranges_;
  bool norm_all_ = true;
  bool sharded_ = false;
  bool mixed_ = false;  // BF16/F16 parameters: the F32 master weights are a copy
  Arena state_{"optimizer"};
  Tensor master_, m_, v_, grad_shard_;
  Tensor scalars_;                  // F64 [kOptimizerScalars], in the backend's memory
  double* host_scalars_ = nullptr;  // page-locked: what prepare() writes for scalars_
  int64_t step_ = 0;
};

}  // namespace kiln
