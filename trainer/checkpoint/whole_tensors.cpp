#include "trainer/checkpoint/whole_tensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "trainer/memory/host_copy.h"

namespace kiln {

std::vector<TensorSource> WholeTensors::sources(bool optimizer) const {
  // Converts the whole values to the pieces' dtype as write_checkpoint reads them.
  const std::shared_ptr<Ops> host_ops = make_cpu_ops(1);
  std::vector<TensorSource> out;
  for (size_t i = 0; i < tensors_->size(); ++i) {
    const WholeTensor& t = (*tensors_)[i];
    if (t.optimizer != optimizer) continue;
    out.push_back({{t.name, t.dtype, t.shape}, [tensors = tensors_, i, host_ops](void* host) {
                     const WholeTensor& w = (*tensors)[i];
                     copy_from_doubles(*host_ops, Tensor{host, w.dtype, w.shape, Device::Cpu},
                                       w.values);
                   }});
  }
  return out;
}

namespace {

// The pieces every rank of `group` holds, in rank order, on its first rank (empty elsewhere).
std::vector<double> collect(Communicator& group, std::vector<double> mine) {
  const auto n = static_cast<int64_t>(mine.size());
  const int size = group.size();
  std::vector<double> pieces(group.rank() == 0 ? static_cast<size_t>(n * size) : 0);
  group.gather(Tensor{pieces.data(), DType::F64, {n * size}}, Tensor{mine.data(), DType::F64, {n}}, 0);
  return pieces;
}

}  // namespace

WholeTensors gather_whole_tensors(const GptModel& model, const OptimizerState& optimizer,
                                  Ops& ops, Communicator& tensor_group, const GatherScope& scope) {
  WholeTensors whole;
  const bool tensor_root = tensor_group.rank() == 0;
  Communicator* experts = scope.expert_group;
  // One tensor at a time: the pieces of the tensor group (every rank's copy of a parameter
  // it holds whole), then, for an expert's, those of the expert group, block by block; the
  // whole on the rank that is first of both. Whole experts skip the tensor group.
  const auto gather = [&](bool in_optimizer, const std::string& name, const Parameter& p,
                          const Tensor& piece) {
    std::vector<double> pieces = copy_to_doubles(ops, piece);
    const bool by_tensor = !p.expert || !scope.whole_experts;
    if (by_tensor && (!p.expert || p.split.tensor_sharded())) pieces = collect(tensor_group, std::move(pieces));
    if (by_tensor && !tensor_root) return;
    if (p.expert) {
      pieces = collect(*experts, std::move(pieces));
      if (experts->rank() != 0) return;
    }
    whole.add({name, piece.dtype, p.whole_shape(), in_optimizer, p.whole_from(pieces)});
  };
  for (const Parameter& p : model.parameters().all()) {
    if (p.copy || (p.expert ? !experts : !scope.dense)) continue;
    gather(false, p.name, p, p.value);
    if (p.frozen) continue;  // a LoRA run's base: no optimizer state
    gather(true, "exp_avg." + p.name, p, p.view_in(optimizer.exp_avg));
    gather(true, "exp_avg_sq." + p.name, p, p.view_in(optimizer.exp_avg_sq));
    if (optimizer.master_copy) gather(true, "master." + p.name, p, p.view_in(optimizer.master));
  }
  return whole;
}

namespace {

// Sends travel as tensors: a text goes as its bytes packed into int64 words, after its
// length.
void send_text(Communicator& comm, const std::string& text, int peer) {
  int64_t length = static_cast<int64_t>(text.size());
  comm.send(Tensor{&length, DType::I64, {1}}, peer, 0);
  std::vector<int64_t> words(static_cast<size_t>((length + 7) / 8), 0);
  std::memcpy(words.data(), text.data(), text.size());
  if (!words.empty())
    comm.send(Tensor{words.data(), DType::I64, {static_cast<int64_t>(words.size())}}, peer, 0);
}

std::string recv_text(Communicator& comm, int peer) {
  int64_t length = 0;
  comm.recv(Tensor{&length, DType::I64, {1}}, peer, 0);
  std::vector<int64_t> words(static_cast<size_t>((length + 7) / 8), 0);
  if (!words.empty())
    comm.recv(Tensor{words.data(), DType::I64, {static_cast<int64_t>(words.size())}}, peer, 0);
  return std::string(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(length));
}

}  // namespace

void gather_pipeline_stages(WholeTensors& whole, Communicator& pipeline_group) {
  const int stage = pipeline_group.rank();
  if (stage > 0) {
    // What the first stage needs to place the values: names, dtypes, shapes and files.
    nlohmann::json index = nlohmann::json::array();
    for (const WholeTensor& t : whole.tensors()) {
      const std::vector<int64_t> dims(t.shape.dims.begin(), t.shape.dims.begin() + t.shape.rank);
      index.push_back({{"name", t.name}, {"dtype", static_cast<int>(t.dtype)}, {"shape", dims},
                       {"optimizer", t.optimizer}});
    }
    send_text(pipeline_group, index.dump(), 0);
    // A send only reads its tensor: the values go without a copy of the whole stage.
    for (const WholeTensor& t : whole.tensors())
      pipeline_group.send(Tensor{const_cast<double*>(t.values.data()), DType::F64,
                                 {static_cast<int64_t>(t.values.size())}},
                          0, 0);
    return;
  }
  for (int from = 1; from < pipeline_group.size(); ++from) {
    const nlohmann::json index = nlohmann::json::parse(recv_text(pipeline_group, from));
    for (const nlohmann::json& entry : index) {
      WholeTensor t;
      t.name = entry["name"].get<std::string>();
      t.dtype = static_cast<DType>(entry["dtype"].get<int>());
      const auto dims = entry["shape"].get<std::vector<int64_t>>();
      t.shape.rank = static_cast<int>(dims.size());
      std::copy(dims.begin(), dims.end(), t.shape.dims.begin());
      t.optimizer = entry["optimizer"].get<bool>();
      t.values.resize(static_cast<size_t>(t.shape.numel()));
      pipeline_group.recv(Tensor{t.values.data(), DType::F64, {t.shape.numel()}}, from, 0);
      whole.add(std::move(t));
    }
  }
}

}  // namespace kiln
