// ProfiledOps forwards every op unchanged and counts calls, FLOPs and bytes per (op, shape).
#include "kernels/profiled_ops.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace kiln {
namespace {

class ProfiledOpsTest : public testing::Test {
 protected:
  std::unique_ptr<Ops> inner = make_cpu_ops(2);
  ProfiledOps profiled{*inner};
  std::mt19937 rng{7};

  Tensor make(std::vector<float>& storage, Shape shape) {
    storage.resize(static_cast<size_t>(shape.numel()));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : storage) v = normal(rng);
    return Tensor{storage.data(), DType::F32, shape, Device::Cpu};
  }
  static Tensor zeros(std::vector<float>& storage, Shape shape) {
    storage.assign(static_cast<size_t>(shape.numel()), 0.0f);
    return Tensor{storage.data(), DType::F32, shape, Device::Cpu};
  }
};

TEST_F(ProfiledOpsTest, ResultsAreTheInnerOpsBitForBit) {
  std::vector<float> a, b, direct, through;
  const Tensor ta = make(a, {6, 5}), tb = make(b, {4, 5});
  const Tensor out_direct = zeros(direct, {6, 4}), out_through = zeros(through, {6, 4});
  inner->matmul(out_direct, ta, false, tb, true, false);
  profiled.matmul(out_through, ta, false, tb, true, false);
  EXPECT_EQ(direct, through);

  std::vector<float> gelu_direct, gelu_through;
  inner->gelu_forward(zeros(gelu_direct, {6, 5}), ta);
  profiled.gelu_forward(zeros(gelu_through, {6, 5}), ta);
  EXPECT_EQ(gelu_direct, gelu_through);

  double sum_direct = 0, sum_through = 0;
  inner->sum_squares(Tensor{&sum_direct, DType::F64, {1}}, ta);
  profiled.sum_squares(Tensor{&sum_through, DType::F64, {1}}, ta);
  EXPECT_EQ(sum_direct, sum_through);
}

TEST_F(ProfiledOpsTest, CountsCallsFlopsAndBytesPerShape) {
  std::vector<float> a, b, out;
  const Tensor ta = make(a, {6, 5}), tb = make(b, {4, 5}), tout = zeros(out, {6, 4});
  profiled.matmul(tout, ta, false, tb, true, false);
  profiled.matmul(tout, ta, false, tb, true, false);
  profiled.add(tout, tout, tout);

  const std::vector<OpProfile> report = profiled.report();
  ASSERT_EQ(report.size(), 2u);
  const OpProfile* matmul = report[0].op == "matmul" ? &report[0] : &report[1];
  const OpProfile* add = report[0].op == "add" ? &report[0] : &report[1];
  EXPECT_EQ(matmul->shape, "6x4x5 fp32->fp32 nt");
  EXPECT_EQ(matmul->calls, 2);
  EXPECT_DOUBLE_EQ(matmul->flops, 2 * (2.0 * 6 * 4 * 5));
  // a [6, 5] + b [4, 5] read, out [6, 4] written, 4 bytes each, twice.
  EXPECT_DOUBLE_EQ(matmul->bytes, 2 * (30 + 20 + 24) * 4.0);
  EXPECT_GE(matmul->seconds, 0.0);

  EXPECT_EQ(add->shape, "6x4 fp32");
  EXPECT_EQ(add->calls, 1);
  EXPECT_DOUBLE_EQ(add->flops, 0.0);
  EXPECT_DOUBLE_EQ(add->bytes, 3 * 24 * 4.0);
}

TEST_F(ProfiledOpsTest, AccumulatingMatmulIsItsOwnRecordAndReadsItsOutput) {
  std::vector<float> a, b, out;
  const Tensor ta = make(a, {6, 5}), tb = make(b, {6, 4}), tout = zeros(out, {5, 4});
  profiled.matmul(tout, ta, true, tb, false, true);
  const std::vector<OpProfile> report = profiled.report();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].shape, "5x4x6 fp32->fp32 tn +=");
  EXPECT_DOUBLE_EQ(report[0].flops, 2.0 * 5 * 4 * 6);
  EXPECT_DOUBLE_EQ(report[0].bytes, (30 + 24 + 2 * 20) * 4.0);
}

// A fused product is one record, labelled and counted as the product it wraps.
TEST_F(ProfiledOpsTest, FusedProductsAreOneRecordEach) {
  std::vector<float> x, w, bias, out, pre, dy, dw, db, dx;
  const Tensor tx = make(x, {6, 5}), tw = make(w, {4, 5}), tbias = make(bias, {4});
  const Tensor tout = zeros(out, {6, 4}), tpre = zeros(pre, {6, 4}), tdy = make(dy, {6, 4});
  const Tensor tdw = zeros(dw, {4, 5}), tdb = zeros(db, {4}), tdx = zeros(dx, {6, 5});
  profiled.matmul_bias(tout, tx, tw, tbias);
  profiled.matmul_bias_gelu(tout, tpre, tx, tw, tbias);
  profiled.matmul_bias_grad(tdw, tdb, tdy, tx);
  profiled.matmul_dgelu(tdx, tdy, tw, tx);
  std::map<std::string, OpProfile> by_op;
  for (const OpProfile& p : profiled.report()) by_op[p.op] = p;
  ASSERT_EQ(by_op.size(), 4u);
  EXPECT_EQ(by_op["matmul_bias"].shape, "6x4x5 fp32->fp32 nt");
  EXPECT_DOUBLE_EQ(by_op["matmul_bias"].flops, 2.0 * 6 * 4 * 5);
  EXPECT_DOUBLE_EQ(by_op["matmul_bias"].bytes, (30 + 20 + 4 + 24) * 4.0);
  EXPECT_EQ(by_op["matmul_bias_gelu"].shape, "6x4x5 fp32->fp32 nt");
  EXPECT_DOUBLE_EQ(by_op["matmul_bias_gelu"].bytes, (30 + 20 + 4 + 24 + 24) * 4.0);
  EXPECT_EQ(by_op["matmul_bias_grad"].shape, "4x5x6 fp32->fp32 tn +=");
  EXPECT_DOUBLE_EQ(by_op["matmul_bias_grad"].bytes, (24 + 30 + 2 * 20 + 2 * 4) * 4.0);
  EXPECT_EQ(by_op["matmul_dgelu"].shape, "6x5x4 fp32->fp32 nn");
  EXPECT_DOUBLE_EQ(by_op["matmul_dgelu"].flops, 2.0 * 6 * 5 * 4);
}

TEST_F(ProfiledOpsTest, AbsentTensorsMoveNoBytes) {
  std::vector<float> master, grad, m, v;
  std::vector<int64_t> table = {0, 6, 1};
  const Tensor segments{table.data(), DType::I64, {1, 3}, Device::Cpu};
  AdamWStep step;
  step.lr = 0.1;
  profiled.adamw(make(master, {6}), make(grad, {6}), zeros(m, {6}), zeros(v, {6}), Tensor{},
                 segments, step);
  const std::vector<OpProfile> report = profiled.report();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].shape, "6 fp32");
  // master, m and v read and written, grad and the table read, no mixed-precision copy.
  EXPECT_DOUBLE_EQ(report[0].bytes, 2 * 3 * 24.0 + 24 + 24);
}

TEST_F(ProfiledOpsTest, MemoryCallsAreNotRecordedAndResetClears) {
  void* block = profiled.allocate(64);
  profiled.synchronize();
  profiled.release(block);
  EXPECT_TRUE(profiled.report().empty());

  std::vector<float> x;
  profiled.scale(make(x, {3, 2}), 0.5);
  EXPECT_EQ(profiled.report().size(), 1u);
  profiled.reset();
  EXPECT_TRUE(profiled.report().empty());
}

}  // namespace
}  // namespace kiln
