// AdamW over every parameter in one op call: F32 master weights (the parameters
// themselves when they are F32 or F64; a copy when they are BF16/F16), first and second
// moments laid out like the flat gradient buffer, decoupled weight decay on matrices and
// embeddings only, global-norm clipping before the update, and skipping of steps whose
// gradients overflowed (fp16 loss scaling).
#pragma once

#include "trainer/config/config.h"
#include "trainer/memory/arena.h"
#include "trainer/model/parameters.h"

namespace kiln {

struct OptimizerStep {
  double grad_norm = 0;  // of the true (unscaled) gradients, before clipping
  bool skipped = false;  // the gradients held an Inf or NaN: nothing was updated
};

class AdamW {
 public:
  AdamW(const TrainConfig& train, ParameterSet& params, Ops& ops);

  // Optimizer state per parameter element, for sizing a run before it allocates.
  static size_t state_bytes_per_element(DType value_dtype);

  // The gradients hold loss_scale times the true gradients. Unscales, clips to
  // train.clip_grad, and updates every parameter with learning rate lr, unless the
  // gradients are not finite.
  OptimizerStep step(double lr, double loss_scale = 1.0);

  int64_t steps_taken() const { return step_; }
  size_t bytes() const { return state_.bytes(); }

  // The state a checkpoint keeps, laid out like the flat gradient buffer: the F32 master
  // weights (the parameters themselves when they are F32 or F64) and the two moments.
  Tensor master() const { return master_; }
  Tensor exp_avg() const { return m_; }
  Tensor exp_avg_sq() const { return v_; }
  bool keeps_master_copy() const { return master_.data != params_.flat_values().data; }
  // After the state was restored from a checkpoint: the bias correction goes on from here.
  void set_steps_taken(int64_t steps) { step_ = steps; }

 private:
  TrainConfig train_;
  ParameterSet& params_;
  Ops& ops_;
  Arena state_{"optimizer"};
  Tensor master_, m_, v_, segments_;
  int64_t step_ = 0;
};

}  // namespace kiln
