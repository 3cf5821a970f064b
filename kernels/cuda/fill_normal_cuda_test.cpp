// Ops::fill_normal on the GPU against the CPU body, bit for bit, in fp32, bf16 and fp16: a whole
// tensor of 2^22 elements (every thread of the grid-stride loop busy several times, tails of
// |z| > 5 reached), and strided runs whose stream indices pass 2^32 (the counter's second
// word), with the elements between them left as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace kiln {
namespace {

class CudaFillNormal : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    gpu_ = make_cuda_ops(0, AttentionChoice::Kiln);
  }

  // A tensor of n elements, every byte 0x5A, after fill_normal: the same bytes on both.
  void expect_same_bits(int64_t n, const RandomRuns& runs, uint64_t seed, uint64_t stream, double mean,
                        double std) {
    const DType dtype = GetParam();
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
    std::vector<unsigned char> cpu(bytes, 0x5A), gpu(bytes, 0);
    cpu_->fill_normal({cpu.data(), dtype, {n}, Device::Cpu}, runs, seed, stream, mean, std);
    const Tensor x{gpu_->allocate(bytes), dtype, {n}, Device::Cuda};
    const std::vector<unsigned char> start(bytes, 0x5A);
    gpu_->copy_from_host(x, start.data());
    gpu_->fill_normal(x, runs, seed, stream, mean, std);
    gpu_->copy_to_host(gpu.data(), x);
    gpu_->release(x.data);
    size_t differ = 0, first = bytes;
    for (size_t i = 0; i < bytes; ++i)
      if (cpu[i] != gpu[i]) {
        ++differ;
        first = std::min(first, i);
      }
    EXPECT_EQ(differ, 0u) << "bytes differ, the first at element " << first / dtype_size(dtype);
  }

  std::unique_ptr<Ops> cpu_ = make_cpu_ops(4);
  std::unique_ptr<Ops> gpu_;
};

TEST_P(CudaFillNormal, AWholeTensorHasTheCpusBits) {
  const int64_t n = int64_t{1} << 22;
  expect_same_bits(n, {1, n, n, 0, n}, 1234, 0x9E3779B97F4A7C15ull, 0.0, 0.02);
}

TEST_P(CudaFillNormal, StridedRunsPastTwoToThe32HaveTheCpusBits) {
  // 300 runs of 1000 elements, 1024 apart (the rest untouched), drawing indices from 2^32 - 5000
  // on, 4096 apart.
  expect_same_bits(300 * 1024, {300, 1000, 1024, (int64_t{1} << 32) - 5000, 4096}, 7, 3, 1.0, 0.5);
}

INSTANTIATE_TEST_SUITE_P(Dtype, CudaFillNormal, testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kiln
