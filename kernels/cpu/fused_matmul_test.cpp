// The CPU backend's fused products (ops.h: matmul_bias and the rest) against the separate ops
// they stand for, called by hand: bit for bit equal, in fp32 and fp64, so a model computing
// with them trains exactly as it did with the separate ops.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/check.h"
#include "kernels/ops.h"

namespace kiln {
namespace {

template <typename T>
class FusedMatmul : public testing::Test {
 protected:
  static constexpr DType kType = sizeof(T) == 4 ? DType::F32 : DType::F64;
  static constexpr int64_t kRows = 37, kIn = 19, kOut = 23;  // no multiples of a tile

  std::unique_ptr<Ops> ops = make_cpu_ops(2);
  std::mt19937_64 rng{11};
  std::vector<std::unique_ptr<std::vector<T>>> storage;

  Tensor random(Shape shape) {
    storage.push_back(std::make_unique<std::vector<T>>(static_cast<size_t>(shape.numel())));
    std::normal_distribution<T> normal(0, 1);
    for (T& v : *storage.back()) v = normal(rng);
    return Tensor{storage.back()->data(), kType, shape, Device::Cpu};
  }
  // A second tensor with x's values.
  Tensor copy(const Tensor& x) {
    storage.push_back(std::make_unique<std::vector<T>>(x.as<T>(), x.as<T>() + x.numel()));
    return Tensor{storage.back()->data(), kType, x.shape, Device::Cpu};
  }
  static void expect_identical(const Tensor& a, const Tensor& b, const char* what) {
    ASSERT_EQ(a.numel(), b.numel());
    EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0) << what << " differs from the separate ops";
  }
};

using Types = testing::Types<float, double>;
TYPED_TEST_SUITE(FusedMatmul, Types);

TYPED_TEST(FusedMatmul, BiasIsMatmulThenAddBias) {
  const Tensor x = this->random({this->kRows, this->kIn}), w = this->random({this->kOut, this->kIn});
  const Tensor bias = this->random({this->kOut});
  const Tensor fused = this->random({this->kRows, this->kOut}), separate = this->copy(fused);
  this->ops->matmul_bias(fused, x, w, bias);
  this->ops->matmul(separate, x, false, w, true, false);
  this->ops->add_bias(separate, bias);
  this->expect_identical(fused, separate, "matmul_bias");
}

TYPED_TEST(FusedMatmul, BiasGeluIsMatmulAddBiasThenGelu) {
  const Tensor x = this->random({this->kRows, this->kIn}), w = this->random({this->kOut, this->kIn});
  const Tensor bias = this->random({this->kOut});
  const Tensor out = this->random({this->kRows, this->kOut}), pre = this->random({this->kRows, this->kOut});
  const Tensor out2 = this->copy(out), pre2 = this->copy(pre);
  this->ops->matmul_bias_gelu(out, pre, x, w, bias);
  this->ops->matmul(pre2, x, false, w, true, false);
  this->ops->add_bias(pre2, bias);
  this->ops->gelu_forward(out2, pre2);
  this->expect_identical(pre, pre2, "matmul_bias_gelu's pre-activation");
  this->expect_identical(out, out2, "matmul_bias_gelu");
}

TYPED_TEST(FusedMatmul, BiasGradIsBiasBackwardThenAccumulatedMatmul) {
  const Tensor dy = this->random({this->kRows, this->kOut}), x = this->random({this->kRows, this->kIn});
  // Accumulators with something in them already, as over micro-batches.
  const Tensor dw = this->random({this->kOut, this->kIn}), db = this->random({this->kOut});
  const Tensor dw2 = this->copy(dw), db2 = this->copy(db);
  this->ops->matmul_bias_grad(dw, db, dy, x);
  this->ops->bias_backward(db2, dy);
  this->ops->matmul(dw2, dy, true, x, false, true);
  this->expect_identical(dw, dw2, "matmul_bias_grad's weight gradient");
  this->expect_identical(db, db2, "matmul_bias_grad's bias gradient");
}

TYPED_TEST(FusedMatmul, DgeluIsMatmulThenGeluBackward) {
  const Tensor dy = this->random({this->kRows, this->kOut}), w = this->random({this->kOut, this->kIn});
  const Tensor pre = this->random({this->kRows, this->kIn});
  const Tensor dx = this->random({this->kRows, this->kIn}), d_hidden = this->random({this->kRows, this->kIn});
  const Tensor dx2 = this->random({this->kRows, this->kIn});
  this->ops->matmul_dgelu(dx, dy, w, pre);
  this->ops->matmul(d_hidden, dy, false, w, false, false);
  this->ops->gelu_backward(dx2, pre, d_hidden);
  this->expect_identical(dx, dx2, "matmul_dgelu");
}

TEST(FusedMatmulChecks, RefuseMismatchedShapesAndAMissingBias) {
  std::unique_ptr<Ops> ops = make_cpu_ops(1);
  std::vector<float> a(64), b(64), c(64), d(8);
  const Tensor x{a.data(), DType::F32, {4, 3}, Device::Cpu}, w{b.data(), DType::F32, {5, 3}, Device::Cpu};
  const Tensor out{c.data(), DType::F32, {4, 5}, Device::Cpu}, bias{d.data(), DType::F32, {5}, Device::Cpu};
  const Tensor short_bias{d.data(), DType::F32, {4}, Device::Cpu}, narrow{c.data(), DType::F32, {4, 4}, Device::Cpu};
  try {
    ops->matmul_bias(out, x, w, short_bias);
    FAIL() << "a bias of the wrong width was taken";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "matmul_bias: x [4, 3], weight [5, 3], bias [4] -> [4, 5]");
  }
  EXPECT_THROW(ops->matmul_bias(out, x, w, Tensor{}), Error);
  EXPECT_THROW(ops->matmul_bias_gelu(out, narrow, x, w, bias), Error);
  EXPECT_THROW(ops->matmul_bias_grad(narrow, bias, out, x), Error);
  EXPECT_THROW(ops->matmul_dgelu(x, out, w, narrow), Error);
}

}  // namespace
}  // namespace kiln
