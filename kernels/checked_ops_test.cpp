// CheckedOps refuses an op whose tensors do not fit before its backend sees them: make_cpu_ops
// hands out the CPU backend inside one.
#include "kernels/checked_ops.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/check.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

Tensor matrix(std::vector<float>& storage, Shape shape, float value) {
  storage.assign(static_cast<size_t>(shape.numel()), value);
  return Tensor{storage.data(), DType::F32, shape, Device::Cpu};
}

using test::error_of;

TEST(CheckedOps, CpuOpsRefuseABadShapeBeforeTheBackendRuns) {
  const auto ops = make_cpu_ops(1);
  std::vector<float> a, b, out;
  const Tensor ta = matrix(a, {2, 3}, 1), tb = matrix(b, {4, 2}, 1), tout = matrix(out, {2, 4}, 7);
  EXPECT_EQ(error_of([&] { ops->matmul(tout, ta, false, tb, false, false); }),
            "matmul: [2, 3] x [4, 2] -> [2, 4]");
  EXPECT_EQ(out, std::vector<float>(8, 7)) << "the backend ran";

  std::vector<float> wide;
  const Tensor twide = matrix(wide, {2, 4}, 1);
  EXPECT_EQ(error_of([&] { ops->add(tout, ta, twide); }), "add: [2, 4] vs [2, 3]");
  EXPECT_EQ(out, std::vector<float>(8, 7)) << "the backend ran";
}

TEST(CheckedOps, CpuOpsRefuseADtypeTheOpTableDoesNotTake) {
  const auto ops = make_cpu_ops(1);
  std::vector<float> a, b;
  std::vector<double> out(8, 0);
  const Tensor ta = matrix(a, {2, 3}, 1), tb = matrix(b, {4, 3}, 1);
  const Tensor tout{out.data(), DType::F64, {2, 4}, Device::Cpu};
  // The CPU keeps a product in its operands' dtype: no widening from fp32 to fp64.
  EXPECT_EQ(error_of([&] { ops->matmul(tout, ta, false, tb, true, false); }),
            "matmul: [2, 3] x [4, 3]^T -> [2, 4]");
  std::vector<float> bias;
  const Tensor tbias = matrix(bias, {4}, 0);
  EXPECT_EQ(error_of([&] { ops->matmul_bias(tout, ta, tb, tbias); }), "matmul_bias: fp32 expected, got fp64");
}

TEST(CheckedOps, CpuOpsForwardWhatFits) {
  const auto ops = make_cpu_ops(1);
  std::vector<float> a, b, out;
  const Tensor ta = matrix(a, {2, 3}, 1), tb = matrix(b, {4, 3}, 2), tout = matrix(out, {2, 4}, 0);
  ops->matmul(tout, ta, false, tb, true, false);
  EXPECT_EQ(out, std::vector<float>(8, 6));
}

}  // namespace
}  // namespace kiln
