// A checkpoint holds every parameter whole, whatever the layout that wrote it: a model split
// over a tensor-parallel group (or its experts over an expert group) has its pieces (and the
// optimizer state laid out like them) gathered to the group's first rank, and a model split into pipeline stages has every
// stage's tensors sent to the first stage, which writes them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/parallel/communicator.h"

namespace kiln {

struct WholeTensor {
  std::string name;
  DType dtype;  // what the checkpoint stores: the pieces' dtype
  Shape shape;
  bool optimizer = false;  // in optimizer.safetensors, not model.safetensors
  std::vector<double> values;
};

class WholeTensors {
 public:
  void add(WholeTensor tensor) { tensors_->push_back(std::move(tensor)); }
  const std::vector<WholeTensor>& tensors() const { return *tensors_; }

  // For write_checkpoint: the sources read the values held here, converted to their dtype.
  std::vector<TensorSource> model_sources() const { return sources(false); }
  std::vector<TensorSource> optimizer_sources() const { return sources(true); }

 private:
  std::vector<TensorSource> sources(bool optimizer) const;
  std::shared_ptr<std::vector<WholeTensor>> tensors_ = std::make_shared<std::vector<WholeTensor>>();
};

// What a rank gathers: the dense parameters with its tensor group (on the first replica),
// the experts with its expert group (on the first expert-data replica).
struct GatherScope {
  bool dense = true;
  Communicator* expert_group = nullptr;  // null: no experts
  // parallel.etp=1: each rank of the expert group holds its experts whole; otherwise their
  // pieces are gathered over the tensor group first, and its first ranks form the group.
  bool whole_experts = false;
};

// A collective over `tensor_group` (the dense parameters, and the experts' pieces unless they
// are whole) and the scope's expert group: on the rank that is first of the groups it gathers
// over, the result holds the whole tensors of the parameters this stage owns (copies of
// another stage's are left to it); elsewhere nothing.
WholeTensors gather_whole_tensors(const GptModel& model, const OptimizerState& optimizer,
                                  Ops& ops, Communicator& tensor_group, const GatherScope& scope);

// A collective over `pipeline_group` (each stage's rank that holds its whole tensors): every
// stage's tensors are added to the first stage's `whole`, in stage order.
void gather_pipeline_stages(WholeTensors& whole, Communicator& pipeline_group);

}  // namespace kiln
