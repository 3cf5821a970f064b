#include "trainer/precision/fp8_scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/error_of.h"

namespace kiln {
namespace {

Fp8Tensor cast(Fp8Scale& scale, std::vector<float> values) {
  return scale.quantize(values.data(), static_cast<int64_t>(values.size()));
}

TEST(Fp8Scale, DelayedScalingTakesTheScaleFromEarlierSteps) {
  Fp8Scale s(Fp8Format::E4M3, Fp8Recipe{});
  EXPECT_EQ(s.scale(), 1.0f);
  const Fp8Tensor first = cast(s, {0.5f, -2.0f, 1.0f});
  EXPECT_EQ(first.scale_inv, 1.0f);  // this step's cast used the scale it had
  EXPECT_EQ(fp8_to_float(first.codes[1], Fp8Format::E4M3), -2.0f);
  s.update();
  EXPECT_EQ(s.scale(), 224.0f);  // 448 / 2
  const Fp8Tensor second = cast(s, {2.0f, 1.0f});
  EXPECT_EQ(second.codes[0], 0x7E);  // the amax lands on the largest code
  EXPECT_EQ(dequantize(second), (std::vector<float>{2.0f, 1.0f}));
  // The history keeps the largest amax: a step of smaller values does not raise the scale.
  cast(s, {0.25f});
  s.update();
  EXPECT_EQ(s.scale(), 224.0f);
}

TEST(Fp8Scale, HistoryLengthMostRecentAndMargin) {
  Fp8Scale short_history(Fp8Format::E4M3, Fp8Recipe{"delayed", 2, "max", 0});
  for (const float amax : {8.0f, 1.0f, 2.0f}) {
    cast(short_history, {amax});
    short_history.update();
  }
  EXPECT_EQ(short_history.scale(), 224.0f);  // 8 has left the two-step history

  Fp8Scale recent(Fp8Format::E4M3, Fp8Recipe{"delayed", 1024, "most_recent", 0});
  cast(recent, {8.0f});
  recent.update();
  cast(recent, {4.0f});
  cast(recent, {1.0f});  // a second cast in the step: the step's amax is the larger
  recent.update();
  EXPECT_EQ(recent.scale(), 112.0f);  // 448 / 4

  Fp8Scale headroom(Fp8Format::E5M2, Fp8Recipe{"delayed", 1024, "max", 2});
  cast(headroom, {1024.0f});
  headroom.update();
  EXPECT_EQ(headroom.scale(), 14.0f);  // 57344 / 1024 / 4
}

TEST(Fp8Scale, CurrentScalingScalesEachTensorByItsOwnAmax) {
  Fp8Scale s(Fp8Format::E5M2, Fp8Recipe{"current", 1, "max", 0});
  const Fp8Tensor t = cast(s, {-0.001f, 0.0005f});
  EXPECT_EQ(s.scale(), 57344.0f / 0.001f);
  EXPECT_EQ(t.codes[0], 0xFB);  // -57344
  const std::vector<float> back = dequantize(t);
  EXPECT_NEAR(back[0], -0.001f, 1e-9);
  EXPECT_NEAR(back[1], 0.0005f, 0.0005f * 0.125f);  // within E5M2's half step
  EXPECT_EQ(t.saturated, 0);
}

TEST(Fp8Scale, GrowingValuesSaturateAndAreCounted) {
  Fp8Scale s(Fp8Format::E4M3, Fp8Recipe{});
  cast(s, {1.0f});
  s.update();  // scale 448
  const Fp8Tensor t = cast(s, {3.0f, -1.5f, 0.5f});
  EXPECT_EQ(t.saturated, 2);
  EXPECT_EQ(dequantize(t), (std::vector<float>{1.0f, -1.0f, 0.5f}));
  s.update();
  EXPECT_EQ(s.scale(), 448.0f / 3.0f);  // and the next step makes room
}

TEST(Fp8Scale, ZeroAndNonFiniteAmaxesLeaveTheScale) {
  Fp8Scale s(Fp8Format::E4M3, Fp8Recipe{});
  cast(s, {2.0f});
  s.update();
  cast(s, {0.0f, -0.0f});
  s.update();
  EXPECT_EQ(s.scale(), 224.0f);
  cast(s, {1.0f, INFINITY});
  cast(s, {NAN});
  s.update();
  EXPECT_EQ(s.scale(), 224.0f);
  EXPECT_EQ(s.non_finite_amaxes(), 2);
  // The non-finite steps never entered the history: a finite one still sets the scale.
  cast(s, {4.0f});
  s.update();
  EXPECT_EQ(s.scale(), 112.0f);
  EXPECT_EQ(test::error_of([] { Fp8Scale(Fp8Format::E4M3, Fp8Recipe{"just-in-time", 1, "max", 0}); }),
            "fp8 scaling must be delayed or current, got \"just-in-time\"");
}

TEST(Fp8Matmul, IsTheProductOfTheDequantizedOperands) {
  // a [2, 3] in E4M3 (activations), b [2, 3] in E5M2 (gradients): out = a b^T.
  const std::vector<float> a_values{0.5f, -1.25f, 3.0f, 0.1f, 0.2f, -0.3f};
  const std::vector<float> b_values{1.0f, 2.0f, -0.75f, -0.01f, 0.5f, 4.0f};
  Fp8Scale sa(Fp8Format::E4M3, Fp8Recipe{"current", 1, "max", 0}), sb(Fp8Format::E5M2, Fp8Recipe{"current", 1, "max", 0});
  const Fp8Tensor a = sa.quantize(a_values.data(), 6), b = sb.quantize(b_values.data(), 6);
  const std::vector<float> out = fp8_matmul_nt(a, b, 2, 2, 3);
  const std::vector<float> da = dequantize(a), db = dequantize(b);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double exact = 0, quantized = 0;
      for (int p = 0; p < 3; ++p) {
        exact += static_cast<double>(a_values[i * 3 + p]) * b_values[j * 3 + p];
        quantized += static_cast<double>(da[i * 3 + p]) * db[j * 3 + p];
      }
      EXPECT_FLOAT_EQ(out[i * 2 + j], static_cast<float>(quantized));
      // E5M2 keeps about 2 significant bits: 12.5% a value at worst, summed over |terms|.
      double magnitude = 0;
      for (int p = 0; p < 3; ++p) magnitude += std::fabs(a_values[i * 3 + p] * b_values[j * 3 + p]);
      EXPECT_LE(std::fabs(out[i * 2 + j] - exact), 0.2 * magnitude) << i << "," << j;
    }
  EXPECT_EQ(test::error_of([&] { fp8_matmul_nt(b, b, 2, 2, 3); }),
            "fp8_matmul_nt: cuBLASLt multiplies no two E5M2 operands");
}

}  // namespace
}  // namespace kiln
