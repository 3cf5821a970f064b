// The FP8 products of the linear layers (fp8_products.h) on the CPU, against the host recipe
// of fp8_scaling.h: the same scales step after step (delayed: from the history; current: from
// each tensor), and the products of the same codes.
#include "trainer/precision/fp8_products.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "tests/normal_values.h"

namespace kiln {
namespace {

constexpr int64_t kFp8Rows = 24, kIn = 32, kOut = 16;

Tensor view(std::vector<float>& v, Shape shape) { return Tensor{v.data(), DType::F32, shape, Device::Cpu}; }

// One layer laid out as a model lays it out: a sizing pass, then the pass with memory.
struct OneLayer {
  std::unique_ptr<Ops> ops = make_cpu_ops(1);
  Fp8Products products;
  int layer = -1;
  explicit OneLayer(const Fp8Recipe& recipe) : products(recipe) {
    for (int pass = 0; pass < 2; ++pass) {
      products.begin_pass();
      layer = products.add(kFp8Rows, kIn, kOut);
      products.end_pass();
      if (pass == 0) products.allocate(*ops);
    }
    products.start(*ops);
  }
};

// out = a b^T of the host casts, and the bound on the fp32 sum's distance from it
// (kernels/cpu/fp8_test.cpp states it: (K + 2) u / (1 - (K + 2) u) times the sum of |terms|).
void expect_near_reference(const std::vector<float>& got, const Fp8Tensor& a, const Fp8Tensor& b, int64_t m,
                           int64_t n, int64_t k, const std::vector<float>& before = {}) {
  const std::vector<float> want = fp8_matmul_nt(a, b, m, n, k);
  const std::vector<float> da = dequantize(a), db = dequantize(b);
  const double u = std::ldexp(1.0, -24), gamma = (k + 2) * u / (1 - (k + 2) * u);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double magnitude = 0;
      for (int64_t p = 0; p < k; ++p)
        magnitude += std::fabs(static_cast<double>(da[static_cast<size_t>(i * k + p)]) * db[static_cast<size_t>(j * k + p)]);
      const size_t at = static_cast<size_t>(i * n + j);
      const double start = before.empty() ? 0.0 : before[at];
      ASSERT_LE(std::fabs(got[at] - (start + want[at])), gamma * magnitude + 2 * u * std::fabs(start + want[at]))
          << i << "," << j;
    }
}

std::vector<float> transpose(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
  return t;
}

// v cast at `scale`, as the device casts a transpose with the scale its tensor has then.
Fp8Tensor cast_at(const std::vector<float>& v, float scale, Fp8Format format) {
  Fp8Tensor t;
  t.format = format;
  t.scale_inv = 1.0f / scale;
  for (const float x : v) t.codes.push_back(float_to_fp8(x * scale, format));
  return t;
}

// Three steps of one layer's forward, backward and update, each product against the host
// recipe's casts: forward casts x and W, backward casts dy, then x and W again transposed at
// the scales they were cast with in forward.
void expect_recipe_over_steps(const Fp8Recipe& recipe) {
  OneLayer l(recipe);
  Fp8Scale sx(Fp8Format::E4M3, recipe), sw(Fp8Format::E4M3, recipe), sdy(Fp8Format::E5M2, recipe);
  for (int step = 0; step < 3; ++step) {
    // Magnitudes that move from step to step, so a delayed scale differs from a current one.
    const float grow = std::pow(4.0f, static_cast<float>(step));
    std::vector<float> x = test::normal_values(kFp8Rows * kIn, grow, 10 + step), w = test::normal_values(kOut * kIn, 0.02f, 20 + step),
                       dy = test::normal_values(kFp8Rows * kOut, 1e-4f / grow, 30 + step);
    std::vector<float> y(kFp8Rows * kOut), dx(kFp8Rows * kIn), dw = test::normal_values(kOut * kIn, 1e-3f, 40 + step);
    const std::vector<float> dw_before = dw;
    l.products.forward(*l.ops, l.layer, view(y, {kFp8Rows, kOut}), view(x, {kFp8Rows, kIn}), view(w, {kOut, kIn}));
    l.products.backward(*l.ops, l.layer, view(dx, {kFp8Rows, kIn}), view(dy, {kFp8Rows, kOut}), view(x, {kFp8Rows, kIn}),
                        view(w, {kOut, kIn}), view(dw, {kOut, kIn}));
    const Fp8Tensor qx = sx.quantize(x.data(), kFp8Rows * kIn), qw = sw.quantize(w.data(), kOut * kIn);
    expect_near_reference(y, qx, qw, kFp8Rows, kOut, kIn);
    const Fp8Tensor qdy = sdy.quantize(dy.data(), kFp8Rows * kOut);
    const Fp8Tensor qdy_t = cast_at(transpose(dy, kFp8Rows, kOut), sdy.scale(), Fp8Format::E5M2),
                    qx_t = cast_at(transpose(x, kFp8Rows, kIn), sx.scale(), Fp8Format::E4M3),
                    qw_t = cast_at(transpose(w, kOut, kIn), sw.scale(), Fp8Format::E4M3);
    expect_near_reference(dw, qdy_t, qx_t, kOut, kIn, kFp8Rows, dw_before);
    expect_near_reference(dx, qdy, qw_t, kFp8Rows, kIn, kOut);
    if (recipe.scaling == "delayed" && step > 0) {  // the scale is the history's, not this step's
      EXPECT_NE(sx.scale(), 448.0f / amax_of(x.data(), kFp8Rows * kIn));
    }
    l.products.update(*l.ops);
    sx.update(), sw.update(), sdy.update();
  }
}

TEST(Fp8Products, DelayedScalingCastsEachStepAtTheScaleTheHistoryGives) {
  expect_recipe_over_steps(Fp8Recipe{"delayed", 2, "max", 0});
}

TEST(Fp8Products, CurrentScalingCastsEachTensorAtItsOwnScale) {
  expect_recipe_over_steps(Fp8Recipe{"current", 1, "max", 1});
}

}  // namespace
}  // namespace kiln
