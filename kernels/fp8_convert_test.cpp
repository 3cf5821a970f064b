#include "kernels/fp8_convert.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln {
namespace {

TEST(Fp8Convert, EveryCodeDecodesAndEncodesBack) {
  for (const Fp8Format format : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    for (int code = 0; code < 256; ++code) {
      const float value = fp8_to_float(static_cast<uint8_t>(code), format);
      const auto bits = static_cast<uint8_t>(code);
      if (std::isnan(value)) {
        EXPECT_EQ(float_to_fp8(value, format), 0x7F) << code;  // CUDA's one NaN
      } else if (std::isinf(value)) {
        EXPECT_EQ(float_to_fp8(value, format), (bits & 0x80) | 0x7B) << code;  // saturates
      } else {
        EXPECT_EQ(float_to_fp8(value, format), bits) << code << " = " << value;
      }
    }
  }
}

TEST(Fp8Convert, FormatsHoldWhatTheirLayoutsSay) {
  EXPECT_EQ(fp8_to_float(0x7E, Fp8Format::E4M3), 448.0f);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7F, Fp8Format::E4M3)));
  EXPECT_EQ(fp8_to_float(0x08, Fp8Format::E4M3), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::E4M3), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_to_float(0x7B, Fp8Format::E5M2), 57344.0f);
  EXPECT_TRUE(std::isinf(fp8_to_float(0x7C, Fp8Format::E5M2)));
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::E5M2), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_to_float(0xC0, Fp8Format::E4M3), -2.0f);
}

TEST(Fp8Convert, RoundsToNearestEvenAndSaturates) {
  const Fp8Format e4m3 = Fp8Format::E4M3, e5m2 = Fp8Format::E5M2;
  // E4M3 steps by 1/8 from 1 to 2: 1 + 1/16 is a tie, to the even 1; 1 + 3/16 to 1.25.
  EXPECT_EQ(fp8_to_float(float_to_fp8(1.0625f, e4m3), e4m3), 1.0f);
  EXPECT_EQ(fp8_to_float(float_to_fp8(1.1875f, e4m3), e4m3), 1.25f);
  EXPECT_EQ(fp8_to_float(float_to_fp8(1.07f, e4m3), e4m3), 1.125f);
  // Ties among subnormals: half the smallest goes to 0, one and a half to two.
  EXPECT_EQ(float_to_fp8(std::ldexp(0.5f, -9), e4m3), 0x00);
  EXPECT_EQ(float_to_fp8(std::ldexp(1.5f, -9), e4m3), 0x02);
  // Past the largest finite value (and infinities): the largest, with the sign.
  EXPECT_EQ(float_to_fp8(449.0f, e4m3), 0x7E);
  EXPECT_EQ(float_to_fp8(1e30f, e4m3), 0x7E);
  EXPECT_EQ(float_to_fp8(-INFINITY, e4m3), 0xFE);
  EXPECT_EQ(float_to_fp8(61440.0f, e5m2), 0x7B);
  EXPECT_EQ(float_to_fp8(INFINITY, e5m2), 0x7B);
  EXPECT_EQ(float_to_fp8(-0.0f, e5m2), 0x80);
  EXPECT_EQ(float_to_fp8(NAN, e5m2), 0x7F);
}

}  // namespace
}  // namespace kiln
