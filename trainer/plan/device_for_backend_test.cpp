// A run's plan is made for the device its backend names: the CPU, or the GPU in Ops::name().
#include <gtest/gtest.h>

#include "trainer/plan/device_spec.h"

namespace kiln {
namespace {

std::string picked(const std::string& ops_name, bool gpu) {
  const std::optional<DeviceSpec> device = device_for_backend(ops_name, gpu);
  return device ? device->name : "none";
}

TEST(DeviceForBackend, ReadsTheGpuFromTheBackendsNameAndTheCpuFromItsKind) {
  EXPECT_EQ(picked("cuda:0 (NVIDIA H200)", true), "h200");
  EXPECT_EQ(picked("cuda:0 (NVIDIA H100 80GB HBM3)", true), "h100");
  EXPECT_EQ(picked("cuda:3 (NVIDIA H100 PCIe)", true), "h100");
  EXPECT_EQ(picked("cuda:0 (NVIDIA A100-SXM4-80GB)", true), "a100");
  EXPECT_EQ(picked("cuda:1 (NVIDIA A100-SXM4-40GB)", true), "a100-40gb");
  EXPECT_EQ(picked("cpu (2 threads, OpenBLAS Haswell)", false), "cpu");
  // The CPU's spec shares out this machine's cores, as kiln plan --gpu cpu does.
  EXPECT_GT(device_for_backend("cpu (1 threads)", false)->cores, 0);
  EXPECT_FALSE(device_for_backend("cpu (1 threads)", false)->gpu);
  EXPECT_DOUBLE_EQ(device_for_backend("cuda:0 (NVIDIA H200)", true)->memory_bytes,
                   device_spec("h200").memory_bytes);
}

TEST(DeviceForBackend, AGpuTheTableDoesNotKnowGetsNoPlan) {
  EXPECT_EQ(picked("cuda:0 (NVIDIA GeForce RTX 4090)", true), "none");
  EXPECT_EQ(picked("cuda:0 (Tesla V100-SXM2-16GB)", true), "none");
  EXPECT_EQ(picked("", true), "none");
  // A GPU backend is read by its name only: "cpu" in it does not make it the CPU.
  EXPECT_EQ(picked("cuda:0 (cpu)", true), "none");
}

}  // namespace
}  // namespace kiln
