// AdamW over every parameter: first and second moments in a buffer laid out like the
// parameters, decoupled weight decay on matrices and embeddings only, global-norm
// gradient clipping before the update.
#pragma once

#include "trainer/config/config.h"
#include "trainer/model/parameters.h"

namespace kiln {

class AdamW {
 public:
  AdamW(const TrainConfig& train, const ParameterSet& params, Ops& ops);

  // The global L2 norm of the gradients (before clipping).
  double grad_norm() const;
  // Clips to train.clip_grad, then updates every parameter with learning rate lr.
  // Returns the gradient norm before clipping.
  double step(double lr);

  int64_t steps_taken() const { return step_; }
  size_t bytes() const { return state_.bytes(); }

 private:
  TrainConfig train_;
  const ParameterSet& params_;
  Ops& ops_;
  Arena state_{"optimizer"};
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
};

}  // namespace kiln
