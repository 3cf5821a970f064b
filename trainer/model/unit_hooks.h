// What a model tells sharded data parallelism (trainer/train/sharded_units.h) as it runs its
// blocks, each a unit of the parameter set (ParameterSet::units()): a block's forward or
// backward is about to start, naming the block that follows it in the same pass (-1: none)
// so that its weights can be gathered meanwhile, and a block's backward has ended, so that
// its gradients can be reduced while the next one computes.
#pragma once

namespace kiln {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int unit, int next) = 0;
  virtual void before_backward(int unit, int next) = 0;
  virtual void after_backward(int unit) = 0;
};

}  // namespace kiln
