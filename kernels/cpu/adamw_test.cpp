// The CPU AdamW op's folded gradient factor: the same update, bit for bit, as scaling the
// gradients in a pass of their own first; one step worked by hand; the segment table's order,
// which the CUDA kernel relies on, checked; the same step read from the optimizer's scalars,
// and a skipped one; the clip rule on the scalars by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

Tensor flat(std::vector<float>& v) { return {v.data(), DType::F32, {static_cast<int64_t>(v.size())}}; }

TEST(CpuAdamW, AFoldedGradientFactorIsAPassOfScalingFirst) {
  const auto ops = make_cpu_ops(1);
  std::vector<int64_t> rows = {0, 3, 1, 3, 5, 0};  // two tensors, the first decayed
  const Tensor segments{rows.data(), DType::I64, {2, 3}};
  std::vector<float> grad = {0.5f, -3.0f, 1e-3f, 7.0f, -0.25f};
  std::vector<float> folded_w = {1.0f, -2.0f, 0.5f, 0.1f, 3.0f}, folded_m(5, 0.01f), folded_v(5, 0.02f);
  std::vector<float> scaled_w = folded_w, scaled_m = folded_m, scaled_v = folded_v, scaled_grad = grad;
  AdamWStep step{1e-2, 0.9, 0.95, 1e-8, 0.1, 4, 1.0 / 1024 * 0.37, Tensor{}};
  ops->adamw(flat(folded_w), flat(grad), flat(folded_m), flat(folded_v), Tensor{}, segments, step);
  ops->scale(flat(scaled_grad), step.grad_scale);
  step.grad_scale = 1;
  ops->adamw(flat(scaled_w), flat(scaled_grad), flat(scaled_m), flat(scaled_v), Tensor{}, segments, step);
  EXPECT_EQ(folded_w, scaled_w);
  EXPECT_EQ(folded_m, scaled_m);
  EXPECT_EQ(folded_v, scaled_v);
}

TEST(CpuAdamW, OneStepByHand) {
  // Step 1 from zero moments: the bias-corrected step is lr x g / (|g| + eps), after decay.
  const auto ops = make_cpu_ops(1);
  std::vector<int64_t> rows = {0, 1, 1};
  std::vector<float> w = {2.0f}, g = {-8.0f}, m = {0.0f}, v = {0.0f};
  ops->adamw(flat(w), flat(g), flat(m), flat(v), Tensor{}, Tensor{rows.data(), DType::I64, {1, 3}},
             AdamWStep{0.1, 0.9, 0.95, 1e-8, 0.5, 1, 0.5, Tensor{}});
  const double gs = -4.0;  // the gradient times its factor
  EXPECT_FLOAT_EQ(m[0], static_cast<float>(0.1 * gs));
  EXPECT_FLOAT_EQ(v[0], static_cast<float>(0.05 * gs * gs));
  EXPECT_NEAR(w[0], 2.0 * (1 - 0.1 * 0.5) + 0.1 * 4.0 / (4.0 + 1e-8), 1e-6);
}

TEST(CpuAdamW, RefusesSegmentsOutOfOrder) {
  // The CUDA kernel finds a chunk's segments by binary search over begins: a table out of
  // order (as a layer's experts listed before the next layer's dense parameters once were)
  // would leave parameters untrained there, so the twin refuses it in one line.
  const auto ops = make_cpu_ops(1);
  std::vector<float> w(6, 1.0f), g(6, 0.5f), m(6, 0.0f), v(6, 0.0f);
  std::vector<int64_t> unsorted = {4, 6, 1, 0, 3, 1};
  EXPECT_EQ(test::error_of([&] {
              ops->adamw(flat(w), flat(g), flat(m), flat(v), Tensor{}, Tensor{unsorted.data(), DType::I64, {2, 3}},
                         AdamWStep{});
            }),
            "adamw: segment 1 begins at 0, before segment 0 ends at 6: the table must be sorted by begin, "
            "without overlaps");
  std::vector<int64_t> overlapping = {0, 3, 1, 2, 5, 1};
  EXPECT_NE(test::error_of([&] {
              ops->adamw(flat(w), flat(g), flat(m), flat(v), Tensor{}, Tensor{overlapping.data(), DType::I64, {2, 3}},
                         AdamWStep{});
            }),
            "(no error)");
}

// The scalars as the optimizer's host writes them for step `step` at lr, and clip_factor's
// outputs given by hand.
std::vector<double> scalars_for(double lr, double weight_decay, int64_t step, double grad_scale) {
  std::vector<double> s(kOptimizerScalars, 0.0);
  const AdamWTerms terms = adamw_terms(lr, 0.9, 0.95, weight_decay, step);
  s[kStepSize] = terms.step_size;
  s[kRootCorrection2] = terms.root_correction2;
  s[kDecay] = terms.decay;
  s[kGradScale] = grad_scale;
  return s;
}

TEST(CpuAdamW, TheScalarsGiveTheStepOfTheHostsValues) {
  const auto ops = make_cpu_ops(1);
  std::vector<int64_t> rows = {0, 3, 1, 3, 5, 0};
  const Tensor segments{rows.data(), DType::I64, {2, 3}};
  std::vector<float> grad = {0.5f, -3.0f, 1e-3f, 7.0f, -0.25f};
  std::vector<float> host_w = {1.0f, -2.0f, 0.5f, 0.1f, 3.0f}, host_m(5, 0.01f), host_v(5, 0.02f);
  std::vector<float> read_w = host_w, read_m = host_m, read_v = host_v;
  const AdamWStep step{1e-2, 0.9, 0.95, 1e-8, 0.1, 4, 0.37, Tensor{}};
  ops->adamw(flat(host_w), flat(grad), flat(host_m), flat(host_v), Tensor{}, segments, step);
  // Read from the scalars, the host's lr, weight decay, step and factor are not looked at.
  std::vector<double> scalars = scalars_for(1e-2, 0.1, 4, 0.37);
  AdamWStep from_scalars{99, 0.9, 0.95, 1e-8, 99, 99, 99, Tensor{}};
  from_scalars.scalars = Tensor{scalars.data(), DType::F64, {kOptimizerScalars}};
  ops->adamw(flat(read_w), flat(grad), flat(read_m), flat(read_v), Tensor{}, segments, from_scalars);
  EXPECT_EQ(read_w, host_w);
  EXPECT_EQ(read_m, host_m);
  EXPECT_EQ(read_v, host_v);

  // A skipped step changes nothing.
  scalars[kSkip] = 1;
  ops->adamw(flat(read_w), flat(grad), flat(read_m), flat(read_v), Tensor{}, segments, from_scalars);
  EXPECT_EQ(read_w, host_w);
  EXPECT_EQ(read_m, host_m);
  EXPECT_EQ(read_v, host_v);
}

TEST(CpuClipFactor, PyTorchsRuleByHand) {
  const auto ops = make_cpu_ops(1);
  std::vector<double> s(kOptimizerScalars, 0.0);
  const Tensor scalars{s.data(), DType::F64, {kOptimizerScalars}};
  // Squared norms 12 and 4 of gradients scaled by 2: the true norm is sqrt(16) / 2 = 2.
  s[kDenseSumSquares] = 12;
  s[kExpertSumSquares] = 4;
  s[kLossScale] = 2;
  s[kClipGrad] = 0.5;
  ops->clip_factor(scalars);
  EXPECT_EQ(s[kGradNorm], 2.0);
  EXPECT_EQ(s[kGradScale], 0.5 * (0.5 / (2.0 + 1e-6)));
  EXPECT_EQ(s[kSkip], 0.0);
  // Under the threshold, or with clipping off, only the loss scale is undone.
  s[kClipGrad] = 3;
  ops->clip_factor(scalars);
  EXPECT_EQ(s[kGradScale], 0.5);
  s[kClipGrad] = 0;
  ops->clip_factor(scalars);
  EXPECT_EQ(s[kGradScale], 0.5);
  // Gradients that are not finite: the step is skipped and reports the squared norm.
  s[kExpertSumSquares] = std::numeric_limits<double>::infinity();
  ops->clip_factor(scalars);
  EXPECT_EQ(s[kSkip], 1.0);
  EXPECT_TRUE(std::isinf(s[kGradNorm]));
  s[kExpertSumSquares] = std::numeric_limits<double>::quiet_NaN();
  ops->clip_factor(scalars);
  EXPECT_EQ(s[kSkip], 1.0);
  EXPECT_TRUE(std::isnan(s[kGradNorm]));
}

TEST(CpuSumSquares, AddsToTheSum) {
  const auto ops = make_cpu_ops(2);
  std::vector<float> x = {1.0f, -2.0f, 3.0f};
  double sum = 0.5;
  ops->sum_squares(Tensor{&sum, DType::F64, {1}}, flat(x));
  EXPECT_EQ(sum, 14.5);
}

}  // namespace
}  // namespace kiln
