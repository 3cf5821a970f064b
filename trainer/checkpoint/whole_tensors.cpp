#include "trainer/checkpoint/whole_tensors.h"

#include <string>
#include <utility>

#include "trainer/memory/host_copy.h"

namespace kiln {

namespace {
// The part of a flat buffer laid out like the parameters that holds p.
Tensor view_of(const Tensor& flat, const Parameter& p) {
  Tensor t = flat;
  t.data = static_cast<char*>(flat.data) + p.offset * static_cast<int64_t>(dtype_size(flat.dtype));
  t.shape = p.value.shape;
  return t;
}
}  // namespace

WholeTensors gather_whole_tensors(const GptModel& model, const OptimizerState& optimizer,
                                  Ops& ops, Communicator& tensor_group) {
  WholeTensors whole;
  whole.values = std::make_shared<std::vector<std::vector<double>>>();
  const bool root = tensor_group.rank() == 0;
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
    into.push_back({{name, dtype, shape}, [values, index, dtype, shape](void* host) {
                      const auto cpu = make_cpu_ops(1);
                      copy_from_doubles(*cpu, Tensor{host, dtype, shape, Device::Cpu},
                                        (*values)[index]);
                    }});
  };
  for (const Parameter& p : model.parameters().all()) {
    gather(whole.model, p.name, p, p.value);
    gather(whole.optimizer, "exp_avg." + p.name, p, view_of(optimizer.exp_avg, p));
    gather(whole.optimizer, "exp_avg_sq." + p.name, p, view_of(optimizer.exp_avg_sq, p));
    if (optimizer.master_copy)
      gather(whole.optimizer, "master." + p.name, p, view_of(optimizer.master, p));
  }
  return whole;
}

}  // namespace kiln
