#include "trainer/checkpoint/whole_tensors.h"

#include <string>
#include <utility>

#include "trainer/memory/host_copy.h"

namespace kiln {

WholeTensors gather_whole_tensors(const GptModel& model, const OptimizerState& optimizer,
                                  Ops& ops, Communicator& tensor_group) {
  WholeTensors whole;
  whole.values = std::make_shared<std::vector<std::vector<double>>>();
  const bool root = tensor_group.rank() == 0;
  // Converts the whole values to the pieces' dtype as write_checkpoint reads them.
  const std::shared_ptr<Ops> host_ops = make_cpu_ops(1);
  const int tp = tensor_group.size();
  // One tensor at a time: its pieces in rank order, then the whole on the first rank.
  const auto gather = [&](std::vector<TensorSource>& into, const std::string& name,
                          const Parameter& p, const Tensor& piece) {
    std::vector<double> mine = copy_to_doubles(ops, piece);
    const auto n = static_cast<int64_t>(mine.size());
    std::vector<double> pieces(root ? static_cast<size_t>(n * tp) : 0);
    tensor_group.gather(Tensor{pieces.data(), DType::F64, {n * tp}},
                        Tensor{mine.data(), DType::F64, {n}}, 0);
    if (!root) return;
    whole.values->push_back(p.whole_from(pieces));
    const size_t index = whole.values->size() - 1;
    const Shape shape = p.whole_shape();
    const DType dtype = piece.dtype;
    auto values = whole.values;
    into.push_back({{name, dtype, shape}, [values, index, dtype, shape, host_ops](void* host) {
                      copy_from_doubles(*host_ops, Tensor{host, dtype, shape, Device::Cpu},
                                        (*values)[index]);
                    }});
  };
  for (const Parameter& p : model.parameters().all()) {
    gather(whole.model, p.name, p, p.value);
    gather(whole.optimizer, "exp_avg." + p.name, p, p.view_in(optimizer.exp_avg));
    gather(whole.optimizer, "exp_avg_sq." + p.name, p, p.view_in(optimizer.exp_avg_sq));
    if (optimizer.master_copy)
      gather(whole.optimizer, "master." + p.name, p, p.view_in(optimizer.master));
  }
  return whole;
}

}  // namespace kiln
