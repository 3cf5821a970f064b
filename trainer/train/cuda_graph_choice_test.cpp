// When a run's step is captured as a CUDA graph, and the one-line reason when it is not:
// every reason, in the order they are checked.
#include <gtest/gtest.h>

#include <string>

#include "trainer/train/cuda_graph_choice.h"

namespace kiln {
namespace {

struct GraphCase {
  int world = 1;
  std::string comm = "nccl";
  Device device = Device::Cuda;
};

CudaGraphChoice choose(const Config& config, const GraphCase& c = {}) {
  return choose_cuda_graphs(config, ParallelLayout(config.parallel, c.world), c.device, c.comm);
}

Config one_gpu() {
  Config c;
  c.backend.device = "cuda";
  return c;
}

TEST(CudaGraphChoice, OneGpuOfADenseModelReplaysItsStep) {
  const CudaGraphChoice choice = choose(one_gpu());
  EXPECT_TRUE(choice.use);
  EXPECT_EQ(choice.why_not, "");
  // fp16's loss scaling and document resets keep it: the scale re-captures, resets are data.
  Config c = one_gpu();
  c.precision.dtype = "fp16";
  c.data.reset_attention_mask = c.data.reset_position_ids = true;
  c.train.recompute = "full";
  EXPECT_TRUE(choose(c).use);
}

TEST(CudaGraphChoice, TheCpuIgnoresTheKey) {
  const CudaGraphChoice choice = choose(Config{}, {1, "nccl", Device::Cpu});
  EXPECT_FALSE(choice.use);
  EXPECT_EQ(choice.why_not, "the CPU backend runs each op as it is called");
}

TEST(CudaGraphChoice, TurnedOff) {
  Config c = one_gpu();
  c.train.cuda_graphs = false;
  EXPECT_EQ(choose(c).why_not, "train.cuda_graphs=false");
}

TEST(CudaGraphChoice, PipelineParallelism) {
  Config c = one_gpu();
  c.parallel.pp = 2;
  EXPECT_EQ(choose(c, {2}).why_not,
            "pipeline parallelism (parallel.pp=2) sends and receives between stages as its schedule runs on the host");
}

TEST(CudaGraphChoice, HostStagedDeviceCommunication) {
  EXPECT_EQ(choose(one_gpu(), {2, "mpi"}).why_not,
            "parallel.device_comm=mpi moves device tensors between ranks through host memory");
}

TEST(CudaGraphChoice, SeveralRanksOverNccl) {
  Config c = one_gpu();
  c.parallel.tp = 2;
  EXPECT_EQ(choose(c, {4}).why_not, "the 4 ranks sum the step's loss and gradient norm through MPI on the host");
}

TEST(CudaGraphChoice, MixtureOfExpertsOfFixedRows) {
  Config c = one_gpu();
  c.model.moe.num_experts = 4;
  EXPECT_EQ(choose(c).why_not,
            "the MoE layers' products are sized by each micro-batch's routing, which the host reads "
            "(moe.pad_to_capacity=true fixes them)");
  c.model.moe.capacity_factor = 1.25;
  c.model.moe.pad_to_capacity = true;
  EXPECT_TRUE(choose(c).use);  // routed on the device into rows of the capacity's sizes
  c.model.moe.bias_update_rate = 1e-3;
  EXPECT_TRUE(choose(c).use);  // the selection bias moves between steps, on the device before the next
}

TEST(CudaGraphChoice, LoraDropout) {
  Config c = one_gpu();
  c.model.lora.rank = 4;
  EXPECT_TRUE(choose(c).use);  // adapters without dropout replay as any step does
  c.model.lora.dropout = 0.1;
  EXPECT_EQ(choose(c).why_not,
            "LoRA's dropout (finetune.lora.dropout=0.1) draws each micro-batch's masks by its sample numbers, "
            "which a replayed step would hold fixed");
}

TEST(CudaGraphChoice, MultiTokenPrediction) {
  Config c = one_gpu();
  c.model.mtp_depth = 2;
  EXPECT_EQ(choose(c).why_not, "multi-token prediction (model.mtp_depth=2) reads each depth's loss back to the host");
}

TEST(CudaGraphChoice, TheFirstReasonWins) {
  Config c = one_gpu();
  c.train.cuda_graphs = false;
  c.parallel.pp = 2;
  c.model.moe.num_experts = 4;
  EXPECT_EQ(choose(c, {2, "mpi", Device::Cpu}).why_not, "the CPU backend runs each op as it is called");
  EXPECT_EQ(choose(c, {2, "mpi"}).why_not, "train.cuda_graphs=false");
}

}  // namespace
}  // namespace kiln
