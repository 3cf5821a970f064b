// The CPU FP8 ops (kernels/cpu/fp8.h), the reference of the device's: casts that are the host
// conversion of x * scale, transposes of the same codes, amaxes that follow NaN, current
// scaling's scale, and products of the decoded codes.
#include "kernels/cpu/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/fp8_meta.h"
#include "kernels/ops.h"
#include "tests/error_of.h"
#include "tests/normal_values.h"

namespace kiln {
namespace {

Tensor view(std::vector<float>& v, Shape shape) { return Tensor{v.data(), DType::F32, shape, Device::Cpu}; }
Tensor codes(std::vector<uint8_t>& v, DType format, Shape shape) { return Tensor{v.data(), format, shape, Device::Cpu}; }

TEST(Fp8CastTranspose, CodesAreTheHostConversionOfTheScaledValuesAndTheirTranspose) {
  const std::unique_ptr<Ops> ops = make_cpu_ops(2);
  const int64_t R = 37, C = 19;  // no multiple of a tile
  std::vector<float> x = test::normal_values(R * C, 3.0f, 1);
  x[5] = 1000.0f;  // beyond E4M3's 448 after scaling: saturates
  std::vector<float> meta{0.5f, 2.0f, 7.0f};
  std::vector<uint8_t> q(static_cast<size_t>(R * C)), qt(q.size());
  ops->fp8_cast_transpose(codes(q, DType::E4M3, {R, C}), codes(qt, DType::E4M3, {C, R}), view(meta, {3}),
                          view(x, {R, C}));
  float amax = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float v = x[static_cast<size_t>(r * C + c)];
      amax = std::max(amax, std::fabs(v));
      ASSERT_EQ(q[static_cast<size_t>(r * C + c)], float_to_fp8(v * 0.5f, Fp8Format::E4M3)) << r << "," << c;
      ASSERT_EQ(qt[static_cast<size_t>(c * R + r)], q[static_cast<size_t>(r * C + c)]);
    }
  EXPECT_EQ(fp8_to_float(q[5], Fp8Format::E4M3), 448.0f);
  EXPECT_EQ(meta[kFp8Amax], 1000.0f);  // the larger of the recorded 7 and this cast's
  EXPECT_EQ(meta[kFp8Scale], 0.5f);    // a cast never moves the scale

  // The transpose alone, in E5M2; a smaller amax leaves the recorded one.
  std::vector<float> small{0.25f, -0.5f, 1.0f, 2.0f, -4.0f, 8.0f};
  std::vector<uint8_t> t(6);
  ops->fp8_cast_transpose({}, codes(t, DType::E5M2, {3, 2}), view(meta, {3}), view(small, {2, 3}));
  EXPECT_EQ(t, (std::vector<uint8_t>{float_to_fp8(0.125f, Fp8Format::E5M2), float_to_fp8(1.0f, Fp8Format::E5M2),
                                      float_to_fp8(-0.25f, Fp8Format::E5M2), float_to_fp8(-2.0f, Fp8Format::E5M2),
                                      float_to_fp8(0.5f, Fp8Format::E5M2), float_to_fp8(4.0f, Fp8Format::E5M2)}));
  EXPECT_EQ(meta[kFp8Amax], 1000.0f);

  small[2] = NAN;  // a NaN is the amax from then on
  ops->fp8_cast_transpose(codes(t, DType::E5M2, {2, 3}), {}, view(meta, {3}), view(small, {2, 3}));
  EXPECT_TRUE(std::isnan(meta[kFp8Amax]));
  small[2] = 1.0f;
  ops->fp8_cast_transpose(codes(t, DType::E5M2, {2, 3}), {}, view(meta, {3}), view(small, {2, 3}));
  EXPECT_TRUE(std::isnan(meta[kFp8Amax]));

  EXPECT_EQ(test::error_of([&] {
              ops->fp8_cast_transpose(codes(t, DType::E5M2, {3, 2}), {}, view(meta, {3}), view(small, {2, 3}));
            }),
            "fp8_cast_transpose: codes [3, 2] for x [2, 3]");
}

TEST(Fp8CurrentScale, TakesTheScaleFromTheTensorsOwnAmax) {
  const std::unique_ptr<Ops> ops = make_cpu_ops(1);
  std::vector<float> x{0.5f, -4.0f, 2.0f}, meta{1.0f, 1.0f, 100.0f};
  ops->fp8_current_scale(view(meta, {3}), view(x, {3}), DType::E4M3, 1);
  EXPECT_EQ(meta[kFp8Amax], 4.0f);  // overwritten, not the larger of the two
  EXPECT_EQ(meta[kFp8Scale], 56.0f);  // 448 / 4 / 2^1
  EXPECT_EQ(meta[kFp8ScaleInv], 1.0f / 56.0f);
  std::vector<float> zeros(3, 0.0f);
  ops->fp8_current_scale(view(meta, {3}), view(zeros, {3}), DType::E5M2, 0);
  EXPECT_EQ(meta[kFp8Scale], 56.0f);  // a zero amax leaves the scale
  EXPECT_EQ(meta[kFp8Amax], 0.0f);
}

// The product against the double sum of the decoded codes' products times both inverse scales.
// Each product of two codes is exact in fp32; the fp32 sum of K terms is within
// gamma_K = K u / (1 - K u) (u = 2^-24) of the exact sum relative to the sum of |terms|, and the
// scale factor and the final rounding add 2 u: the bound used is (K + 2) u / (1 - (K + 2) u) times
// the sum of |terms| times both inverse scales, whatever order the BLAS adds in.
void expect_product(DType a_format, DType b_format, bool accumulate) {
  const std::unique_ptr<Ops> ops = make_cpu_ops(2);
  const int64_t M = 23, N = 17, K = 64;
  std::vector<float> a = test::normal_values(M * K, 1.0f, 2), b = test::normal_values(N * K, 0.01f, 3);
  std::vector<float> a_meta{0, 0, 0}, b_meta{0, 0, 0};
  ops->fp8_current_scale(view(a_meta, {3}), view(a, {M, K}), a_format, 0);
  ops->fp8_current_scale(view(b_meta, {3}), view(b, {N, K}), b_format, 0);
  std::vector<uint8_t> qa(static_cast<size_t>(M * K)), qb(static_cast<size_t>(N * K));
  ops->fp8_cast_transpose(codes(qa, a_format, {M, K}), {}, view(a_meta, {3}), view(a, {M, K}));
  ops->fp8_cast_transpose(codes(qb, b_format, {N, K}), {}, view(b_meta, {3}), view(b, {N, K}));
  std::vector<float> out(static_cast<size_t>(M * N), accumulate ? 1.5f : 0.0f);
  ops->fp8_matmul(view(out, {M, N}), codes(qa, a_format, {M, K}), view(a_meta, {3}), codes(qb, b_format, {N, K}),
                  view(b_meta, {3}), accumulate);
  const Fp8Format fa = fp8_format(a_format, "test"), fb = fp8_format(b_format, "test");
  const double u = std::ldexp(1.0, -24), gamma = (K + 2) * u / (1 - (K + 2) * u);
  const double scales = static_cast<double>(a_meta[kFp8ScaleInv]) * b_meta[kFp8ScaleInv];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < K; ++p) {
        const double term = static_cast<double>(fp8_to_float(qa[static_cast<size_t>(i * K + p)], fa)) *
                            fp8_to_float(qb[static_cast<size_t>(j * K + p)], fb);
        sum += term;
        magnitude += std::fabs(term);
      }
      const double want = sum * scales + (accumulate ? 1.5 : 0.0);
      // Accumulating adds one more fp32 rounding of the result.
      const double bound = gamma * magnitude * scales + (accumulate ? u * std::fabs(want) : 0.0);
      ASSERT_LE(std::fabs(out[static_cast<size_t>(i * N + j)] - want), bound) << i << "," << j;
    }
}

TEST(Fp8Matmul, IsTheFloatProductOfTheDecodedCodesWithinTheFp32SumBound) {
  expect_product(DType::E4M3, DType::E4M3, false);  // forward: activations x weights
  expect_product(DType::E5M2, DType::E4M3, false);  // input gradient: gradients x weights
  expect_product(DType::E5M2, DType::E4M3, true);   // weight gradient, accumulated
  const std::unique_ptr<Ops> ops = make_cpu_ops(1);
  std::vector<uint8_t> q(16);
  std::vector<float> meta{1, 1, 0}, out(4);
  EXPECT_EQ(test::error_of([&] {
              ops->fp8_matmul(view(out, {2, 2}), codes(q, DType::E5M2, {2, 8}), view(meta, {3}),
                              codes(q, DType::E5M2, {2, 8}), view(meta, {3}), false);
            }),
            "fp8_matmul: no product of two e5m2 operands");
}

}  // namespace
}  // namespace kiln
