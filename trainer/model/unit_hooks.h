// What a model tells sharded data parallelism (trainer/train/sharded_units.h) as it runs, of
// each unit of the parameter set (ParameterSet::units(): a block, the head, the embeddings):
// its values are about to be read, in a forward or a backward, naming the unit read after
// it in the same pass (-1: none) so that its weights can be gathered meanwhile; its backward
// is about to add gradients; its backward has ended, so that its gradients can be reduced
// while the next unit computes. The embeddings' backward adds gradients without reading
// their values.
#pragma once

namespace kiln {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_reading(int unit, int next) = 0;
  virtual void before_gradients(int unit) = 0;
  virtual void after_gradients(int unit) = 0;
};

}  // namespace kiln
