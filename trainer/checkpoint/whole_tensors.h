// A checkpoint holds every parameter whole, whatever the layout that wrote it: a model split
// over a tensor-parallel group has its pieces (and the optimizer state laid out like them)
// gathered to the group's first rank, which writes them.
#pragma once

#include <memory>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/parallel/communicator.h"

namespace kiln {

struct WholeTensors {
  std::vector<TensorSource> model, optimizer;  // for write_checkpoint
  std::shared_ptr<std::vector<std::vector<double>>> values;  // what the sources read
};

// A collective over `tensor_group`: on its rank 0 the sources read the whole tensors (in the
// dtype of the pieces); elsewhere they are empty.
WholeTensors gather_whole_tensors(const GptModel& model, const OptimizerState& optimizer,
                                  Ops& ops, Communicator& tensor_group);

}  // namespace kiln
