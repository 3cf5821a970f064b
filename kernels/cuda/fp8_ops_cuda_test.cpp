// The device's FP8 ops against their CPU twins (kernels/cpu/fp8.h): cast-and-transpose and the
// amax bit for bit, current scaling's scale bit for bit, and each FP8 product within the fp32
// sum bound of the CPU reference of the same codes.
//
// The product's bound: the terms (products of two codes) are exact in fp32 on both sides; the
// two sums differ only in order, each within gamma_K = K u / (1 - K u) (u = 2^-24) of the exact
// sum relative to the sum of |terms|, so the device's result is within 2 gamma_(K+2) of the CPU's
// relative to that sum, plus the rounding of the output: half a bf16 ulp (2^-8 relative) for
// bf16, u for fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/fp8_meta.h"
#include "kernels/ops.h"
#include "trainer/memory/host_copy.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

class CudaFp8 : public testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    gpu_ = make_cuda_ops(0, AttentionChoice::Kiln);
    if (const std::string why = gpu_->fp8_unsupported(); !why.empty()) FAIL() << why;
  }
  void TearDown() override {
    for (void* p : owned_) gpu_->release(p);
  }
  Tensor device(Shape shape, DType type) {
    Tensor t{nullptr, type, shape, Device::Cuda};
    t.data = gpu_->allocate(t.bytes());
    owned_.push_back(t.data);
    return t;
  }
  // Random values of `scale` in `type` on the device, and the same values (rounded) as floats.
  Tensor random(Shape shape, DType type, double scale, std::vector<float>& host) {
    const Tensor t = device(shape, type);
    std::vector<double> v(static_cast<size_t>(shape.numel()));
    for (double& x : v) x = scale * rng_.normal();
    copy_from_doubles(*gpu_, t, v);
    const std::vector<double> rounded = copy_to_doubles(*gpu_, t);
    host.assign(rounded.begin(), rounded.end());
    return t;
  }
  std::vector<uint8_t> bytes(const Tensor& t) {
    std::vector<uint8_t> out(t.bytes());
    gpu_->copy_to_host(out.data(), t);
    return out;
  }
  std::vector<float> floats(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    gpu_->copy_to_host(out.data(), t);
    return out;
  }
  Tensor meta(float scale, float amax) {
    const Tensor m = device({kFp8MetaSize}, DType::F32);
    const float values[kFp8MetaSize] = {scale, 1.0f / scale, amax};
    gpu_->copy_from_host(m, values);
    return m;
  }

  std::unique_ptr<Ops> cpu_ = make_cpu_ops(2);
  std::unique_ptr<Ops> gpu_;
  std::vector<void*> owned_;
  Random rng_{7};
};

TEST_F(CudaFp8, CastTransposeAndAmaxAreTheCpusBitForBit) {
  for (const DType x_type : {DType::F32, DType::BF16, DType::F16})
    for (const DType format : {DType::E4M3, DType::E5M2}) {
      const int64_t R = 100, C = 75;  // partial tiles on both edges
      std::vector<float> x;
      const Tensor gx = random({R, C}, x_type, 3.0, x);
      x[17] = 2000.0f;  // saturates in E4M3 at scale 0.37
      copy_from_doubles(*gpu_, gx, std::vector<double>(x.begin(), x.end()));
      const Tensor gq = device({R, C}, format), gqt = device({C, R}, format), gm = meta(0.37f, 1.0f);
      gpu_->fp8_cast_transpose(gq, gqt, gm, gx);
      std::vector<uint8_t> q(static_cast<size_t>(R * C)), qt(q.size());
      std::vector<float> m{0.37f, 1.0f / 0.37f, 1.0f};
      cpu_->fp8_cast_transpose({q.data(), format, {R, C}, Device::Cpu}, {qt.data(), format, {C, R}, Device::Cpu},
                               {m.data(), DType::F32, {kFp8MetaSize}, Device::Cpu},
                               {x.data(), DType::F32, {R, C}, Device::Cpu});
      EXPECT_EQ(bytes(gq), q) << dtype_name(x_type) << " " << dtype_name(format);
      EXPECT_EQ(bytes(gqt), qt) << dtype_name(x_type) << " " << dtype_name(format);
      EXPECT_EQ(floats(gm), m) << dtype_name(x_type) << " " << dtype_name(format);

      gpu_->fp8_current_scale(gm, gx, format, 1);
      cpu_->fp8_current_scale({m.data(), DType::F32, {kFp8MetaSize}, Device::Cpu},
                              {x.data(), DType::F32, {R, C}, Device::Cpu}, format, 1);
      EXPECT_EQ(floats(gm), m) << dtype_name(x_type) << " " << dtype_name(format);
    }
}

TEST_F(CudaFp8, ANanIsTheAmaxAsOnTheCpu) {
  std::vector<float> x;
  const Tensor gx = random({32, 32}, DType::BF16, 1.0, x);
  x[100] = NAN;
  copy_from_doubles(*gpu_, gx, std::vector<double>(x.begin(), x.end()));
  const Tensor gq = device({32, 32}, DType::E4M3), gm = meta(1.0f, 0.0f);
  gpu_->fp8_cast_transpose(gq, {}, gm, gx);
  EXPECT_TRUE(std::isnan(floats(gm)[kFp8Amax]));
}

// Each product a [M, K] x b [N, K]^T as the linear layers take them: the operands cast on the
// device at their current scales, multiplied there, against the CPU's product of the same codes
// (copied back) within the bound above.
TEST_F(CudaFp8, ProductsHoldToTheCpuReferenceOfTheSameCodes) {
  struct Case {
    const char* name;
    DType a_format, b_format, out;
    bool accumulate;
    int64_t M, N, K;
  };
  const Case cases[] = {{"forward", DType::E4M3, DType::E4M3, DType::BF16, false, 256, 192, 128},
                        {"input gradient", DType::E5M2, DType::E4M3, DType::BF16, false, 256, 128, 192},
                        {"weight gradient", DType::E5M2, DType::E4M3, DType::F32, true, 192, 128, 256}};
  const double u = std::ldexp(1.0, -24);
  for (const Case& c : cases) {
    std::vector<float> a, b;
    const Tensor ga = random({c.M, c.K}, DType::BF16, 1.0, a), gb = random({c.N, c.K}, DType::BF16, 0.02, b);
    const Tensor gam = meta(1.0f, 0.0f), gbm = meta(1.0f, 0.0f);
    gpu_->fp8_current_scale(gam, ga, c.a_format, 0);
    gpu_->fp8_current_scale(gbm, gb, c.b_format, 0);
    const Tensor qa = device({c.M, c.K}, c.a_format), qb = device({c.N, c.K}, c.b_format);
    gpu_->fp8_cast_transpose(qa, {}, gam, ga);
    gpu_->fp8_cast_transpose(qb, {}, gbm, gb);
    std::vector<float> start;
    const Tensor out = c.accumulate ? random({c.M, c.N}, c.out, 0.1, start) : device({c.M, c.N}, c.out);
    gpu_->fp8_matmul(out, qa, gam, qb, gbm, c.accumulate);
    const std::vector<double> got = copy_to_doubles(*gpu_, out);

    std::vector<uint8_t> ca = bytes(qa), cb = bytes(qb);
    std::vector<float> am = floats(gam), bm = floats(gbm), want(static_cast<size_t>(c.M * c.N), 0.0f);
    if (c.accumulate) want = start;
    cpu_->fp8_matmul({want.data(), DType::F32, {c.M, c.N}, Device::Cpu}, {ca.data(), c.a_format, {c.M, c.K}, Device::Cpu},
                     {am.data(), DType::F32, {kFp8MetaSize}, Device::Cpu}, {cb.data(), c.b_format, {c.N, c.K}, Device::Cpu},
                     {bm.data(), DType::F32, {kFp8MetaSize}, Device::Cpu}, c.accumulate);
    const Fp8Format fa = fp8_format(c.a_format, "test"), fb = fp8_format(c.b_format, "test");
    const double gamma = (c.K + 2) * u / (1 - (c.K + 2) * u);
    const double scales = static_cast<double>(am[kFp8ScaleInv]) * bm[kFp8ScaleInv];
    const double out_rounding = c.out == DType::BF16 ? std::ldexp(1.0, -8) : u;
    int64_t outside = 0;
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double magnitude = 0;
        for (int64_t p = 0; p < c.K; ++p)
          magnitude += std::fabs(static_cast<double>(fp8_to_float(ca[static_cast<size_t>(i * c.K + p)], fa)) *
                                 fp8_to_float(cb[static_cast<size_t>(j * c.K + p)], fb));
        const size_t at = static_cast<size_t>(i * c.N + j);
        const double bound = 2 * gamma * magnitude * scales + out_rounding * std::fabs(want[at]) + u * std::fabs(want[at]);
        if (std::fabs(got[at] - want[at]) > bound && outside++ < 5)
          ADD_FAILURE() << c.name << " [" << i << ", " << j << "]: device " << got[at] << ", cpu " << want[at]
                        << ", bound " << bound;
      }
    EXPECT_EQ(outside, 0) << c.name;
  }
}

}  // namespace
}  // namespace kiln
