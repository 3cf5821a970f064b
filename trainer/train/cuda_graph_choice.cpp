#include "trainer/train/cuda_graph_choice.h"

#include <fmt/core.h>

namespace kiln {

CudaGraphChoice choose_cuda_graphs(const Config& config, const ParallelLayout& layout, Device device,
                                   const std::string& device_comm) {
  const auto no = [](std::string why) { return CudaGraphChoice{false, std::move(why)}; };
  if (device != Device::Cuda) return no("the CPU backend runs each op as it is called");
  if (!config.train.cuda_graphs) return no("train.cuda_graphs=false");
  if (layout.pp() > 1)
    return no(fmt::format("pipeline parallelism (parallel.pp={}) sends and receives between stages as its "
                          "schedule runs on the host",
                          layout.pp()));
  if (layout.world() > 1 && device_comm == "mpi")
    return no("parallel.device_comm=mpi moves device tensors between ranks through host memory");
  if (layout.world() > 1)
    return no(fmt::format("the {} ranks sum the step's loss and gradient norm through MPI on the host",
                          layout.world()));
  // The routing runs on the device; what the host still reads is each expert's rows, which size
  // the experts' products, unless every expert computes its capacity's.
  if (config.model.moe.enabled() && !config.model.moe.pad_to_capacity)
    return no("the MoE layers' products are sized by each micro-batch's routing, which the host reads "
              "(moe.pad_to_capacity=true fixes them)");
  if (config.model.lora.enabled() && config.model.lora.dropout > 0)
    return no(fmt::format("LoRA's dropout (finetune.lora.dropout={}) draws each micro-batch's masks by its sample "
                          "numbers, which a replayed step would hold fixed",
                          config.model.lora.dropout));
  if (config.model.mtp_depth > 0)
    return no(fmt::format("multi-token prediction (model.mtp_depth={}) reads each depth's loss back to the host",
                          config.model.mtp_depth));
  return {true, ""};
}

}  // namespace kiln
