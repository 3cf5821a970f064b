// What a captured step stands on, on the GPU: a capture runs nothing, and each replay reads
// page-locked memory as it is then; a capture that waits for the device declines in one line
// and leaves the ops working; the optimizer's scalars give the CPU's clip bits and the step of
// the host's values; two op tables sum squares side by side without sharing scratch.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/ops.h"
#include "trainer/memory/host_copy.h"

namespace kiln {
namespace {

class CudaGraph : public testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    gpu_ = make_cuda_ops(0, AttentionChoice::Kiln);
  }
  void TearDown() override {
    for (void* p : owned_) gpu_->release(p);
  }
  Tensor device(Shape shape, DType dtype) {
    Tensor t{nullptr, dtype, shape, Device::Cuda};
    t.data = gpu_->allocate(t.bytes());
    owned_.push_back(t.data);
    return t;
  }
  std::unique_ptr<Ops> gpu_;
  std::vector<void*> owned_;
};

TEST_F(CudaGraph, ReplaysReadThePinnedMemoryOfTheirTime) {
  auto* host = static_cast<float*>(gpu_->allocate_host(4 * sizeof(float)));
  const Tensor x = device({4}, DType::F32);
  std::string why;
  const std::unique_ptr<OpGraph> graph = gpu_->capture(
      [&] {
        gpu_->copy_from_pinned(x, host);
        gpu_->scale(x, 2.0);
      },
      why);
  ASSERT_TRUE(graph) << why;
  EXPECT_EQ(copy_to_doubles(*gpu_, x), std::vector<double>(4, 0.0)) << "the capture ran its ops";
  for (float first : {1.0f, 5.0f}) {
    for (int i = 0; i < 4; ++i) host[i] = first + static_cast<float>(i);
    graph->launch();
    EXPECT_EQ(copy_to_doubles(*gpu_, x),
              (std::vector<double>{2 * first, 2 * first + 2, 2 * first + 4, 2 * first + 6}));
  }
  gpu_->release_host(host);
}

TEST_F(CudaGraph, ACaptureThatWaitsForTheDeviceDeclines) {
  const Tensor x = device({4}, DType::F32);
  float back[4];
  std::string why;
  EXPECT_FALSE(gpu_->capture([&] { gpu_->copy_to_host(back, x); }, why));
  EXPECT_NE(why, "");
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  // The ops work on.
  gpu_->fill(x, 3.0);
  EXPECT_EQ(copy_to_doubles(*gpu_, x), std::vector<double>(4, 3.0));
}

// The scalars as the optimizer's host writes them, with squared norms summed in.
std::vector<double> scalars_with(double dense, double expert) {
  std::vector<double> s(kOptimizerScalars, 0.0);
  const AdamWTerms terms = adamw_terms(3e-3, 0.9, 0.95, 0.1, 7);
  s[kLossScale] = 1024;
  s[kClipGrad] = 1.0;
  s[kStepSize] = terms.step_size;
  s[kRootCorrection2] = terms.root_correction2;
  s[kDecay] = terms.decay;
  s[kDenseSumSquares] = dense;
  s[kExpertSumSquares] = expert;
  return s;
}

TEST_F(CudaGraph, TheClipRuleGivesTheCpusBits) {
  const auto cpu = make_cpu_ops(1);
  for (const double dense : {2.5e9, 1e3, 0.0}) {
    std::vector<double> on_cpu = scalars_with(dense, 7.25);
    cpu->clip_factor(Tensor{on_cpu.data(), DType::F64, {kOptimizerScalars}});
    const Tensor scalars = device({kOptimizerScalars}, DType::F64);
    gpu_->copy_from_host(scalars, scalars_with(dense, 7.25).data());
    gpu_->clip_factor(scalars);
    const std::vector<double> on_gpu = copy_to_doubles(*gpu_, scalars);
    for (int64_t i : {kGradNorm, kGradScale, kSkip}) EXPECT_EQ(on_gpu[i], on_cpu[i]) << "scalar " << i;
  }
}

TEST_F(CudaGraph, AdamWReadsTheScalarsAsTheHostsValuesAndSkips) {
  const int64_t n = 5000;
  std::vector<int64_t> rows = {0, 2000, 1, 2000, 5000, 0};
  const Tensor segments = device({2, 3}, DType::I64);
  gpu_->copy_from_host(segments, rows.data());
  std::vector<double> start(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) start[static_cast<size_t>(i)] = 0.001 * static_cast<double>(i % 97) - 0.04;
  std::vector<Tensor> a, b;  // master, grad, m, v: the host's values, and the scalars'
  for (std::vector<Tensor>* side : {&a, &b})
    for (int k = 0; k < 4; ++k) {
      side->push_back(device({n}, DType::F32));
      copy_from_doubles(*gpu_, side->back(), start);
    }
  for (std::vector<Tensor>* side : {&a, &b}) gpu_->fill((*side)[3], 0.01);  // v >= 0
  std::vector<double> s = scalars_with(0, 0);
  s[kGradScale] = 0.25;
  gpu_->adamw(a[0], a[1], a[2], a[3], Tensor{}, segments, AdamWStep{3e-3, 0.9, 0.95, 1e-8, 0.1, 7, 0.25, Tensor{}});
  AdamWStep from_scalars{0, 0.9, 0.95, 1e-8, 0, 1, 1, Tensor{}};
  from_scalars.scalars = device({kOptimizerScalars}, DType::F64);
  gpu_->copy_from_host(from_scalars.scalars, s.data());
  gpu_->adamw(b[0], b[1], b[2], b[3], Tensor{}, segments, from_scalars);
  for (int k : {0, 2, 3}) EXPECT_EQ(copy_to_doubles(*gpu_, b[k]), copy_to_doubles(*gpu_, a[k])) << "tensor " << k;
  EXPECT_NE(copy_to_doubles(*gpu_, a[0]), start);

  // Skipped: nothing moves.
  const std::vector<double> master = copy_to_doubles(*gpu_, b[0]);
  s[kSkip] = 1;
  gpu_->copy_from_host(from_scalars.scalars, s.data());
  gpu_->adamw(b[0], b[1], b[2], b[3], Tensor{}, segments, from_scalars);
  EXPECT_EQ(copy_to_doubles(*gpu_, b[0]), master);
}

TEST_F(CudaGraph, TwoOpTablesSumSquaresSideBySide) {
  // Each table has its own partial sums: on two streams at once, neither reads the other's.
  auto other = make_cuda_ops(0, AttentionChoice::Kiln);
  const int64_t n = 1 << 22;
  const std::vector<double> ones(static_cast<size_t>(n), 1.0), twos(static_cast<size_t>(n), 2.0);
  Tensor x = device({n}, DType::F32), sum = device({1}, DType::F64);
  copy_from_doubles(*gpu_, x, ones);
  Tensor y{other->allocate(static_cast<size_t>(n) * 4), DType::F32, {n}, Device::Cuda};
  Tensor other_sum{other->allocate(8), DType::F64, {1}, Device::Cuda};
  copy_from_doubles(*other, y, twos);
  for (int i = 0; i < 20; ++i) {
    gpu_->sum_squares(sum, x);
    other->sum_squares(other_sum, y);
  }
  EXPECT_EQ(copy_to_doubles(*gpu_, sum)[0], 20.0 * static_cast<double>(n));
  EXPECT_EQ(copy_to_doubles(*other, other_sum)[0], 80.0 * static_cast<double>(n));
  other->release(y.data);
  other->release(other_sum.data);
}

}  // namespace
}  // namespace kiln
