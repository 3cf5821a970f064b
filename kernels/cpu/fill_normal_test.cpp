// Ops::fill_normal on the CPU: each element named by the runs holds the scalar formula's value,
// mean + std * counter_normal(seed, stream, index), rounded to the dtype as copy_from_doubles
// rounds, bit for bit; the elements between the runs are untouched; the thread count changes
// nothing; runs that do not fit are refused.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/counter_random.h"
#include "kernels/half_convert.h"
#include "kernels/ops.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

// The element's bits as the scalar formula gives them, zero-extended to 64 bits.
uint64_t reference_bits(DType dtype, uint64_t seed, uint64_t stream, uint64_t index, double mean, double std) {
  const double v = std::fma(std, counter_normal(seed, stream, index), mean);
  switch (dtype) {
    case DType::F64: return std::bit_cast<uint64_t>(v);
    case DType::F32: return std::bit_cast<uint32_t>(static_cast<float>(v));
    case DType::BF16: return float_to_bf16(static_cast<float>(v));
    default: return float_to_f16(static_cast<float>(v));
  }
}

uint64_t bits_at(const std::vector<unsigned char>& bytes, DType dtype, int64_t i) {
  uint64_t b = 0;
  std::memcpy(&b, bytes.data() + i * static_cast<int64_t>(dtype_size(dtype)), dtype_size(dtype));
  return b;
}

class CpuFillNormal : public testing::TestWithParam<DType> {};

TEST_P(CpuFillNormal, EachElementIsTheScalarFormulasRounded) {
  const DType dtype = GetParam();
  const auto ops = make_cpu_ops(3);
  // Three runs of 5 elements, 16 apart in a [4, 16] tensor, drawing indices 1000 + 40 r + c.
  std::vector<unsigned char> bytes(64 * dtype_size(dtype), 0xA5);
  const Tensor x{bytes.data(), dtype, {4, 16}, Device::Cpu};
  const RandomRuns runs{3, 5, 16, 1000, 40};
  ops->fill_normal(x, runs, 77, 0xFEEDull << 40, 0.25, 0.02);
  const uint64_t untouched = bits_at(std::vector<unsigned char>(8, 0xA5), dtype, 0);
  for (int64_t i = 0; i < 64; ++i) {
    const int64_t r = i / 16, c = i % 16;
    const bool drawn = r < 3 && c < 5;
    const uint64_t want =
        drawn ? reference_bits(dtype, 77, 0xFEEDull << 40, 1000 + 40 * r + c, 0.25, 0.02) : untouched;
    EXPECT_EQ(bits_at(bytes, dtype, i), want) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuFillNormal, testing::Values(DType::F64, DType::F32, DType::BF16, DType::F16),
                         [](const testing::TestParamInfo<DType>& info) { return dtype_name(info.param); });

TEST(CpuFillNormalThreads, OneThreadAndFourGiveTheSameBits) {
  std::vector<float> one(100003), four(100003);
  const RandomRuns runs{1, 100003, 100003, 5, 100003};
  make_cpu_ops(1)->fill_normal({one.data(), DType::F32, {100003}, Device::Cpu}, runs, 9, 1, 0, 1);
  make_cpu_ops(4)->fill_normal({four.data(), DType::F32, {100003}, Device::Cpu}, runs, 9, 1, 0, 1);
  EXPECT_EQ(std::memcmp(one.data(), four.data(), one.size() * sizeof(float)), 0);
}

TEST(CpuFillNormalChecks, RunsThatDoNotFitAreRefused) {
  const auto ops = make_cpu_ops(1);
  std::vector<float> v(32);
  const Tensor x{v.data(), DType::F32, {4, 8}, Device::Cpu};
  EXPECT_EQ(test::error_of([&] { ops->fill_normal(x, {4, 8, 9, 0, 8}, 1, 1, 0, 1); }),
            "fill_normal: 4 runs of 8 elements, 9 apart in [4, 8] and 8 apart in the stream from 0, do not "
            "fit or overlap");
  EXPECT_EQ(test::error_of([&] { ops->fill_normal(x, {2, 8, 4, 0, 8}, 1, 1, 0, 1); }),
            "fill_normal: 2 runs of 8 elements, 4 apart in [4, 8] and 8 apart in the stream from 0, do not "
            "fit or overlap");
  EXPECT_EQ(test::error_of([&] { ops->fill_normal(x, {2, 4, 8, 0, 2}, 1, 1, 0, 1); }),
            "fill_normal: 2 runs of 4 elements, 8 apart in [4, 8] and 2 apart in the stream from 0, do not "
            "fit or overlap");
  EXPECT_EQ(test::error_of([&] { ops->fill_normal(x, {4, 8, 8, 0, 8}, 1, 1, 0, 1); }), "(no error)");
  std::vector<int32_t> ids(4);
  EXPECT_EQ(test::error_of([&] {
              ops->fill_normal({ids.data(), DType::I32, {4}, Device::Cpu}, {1, 4, 4, 0, 4}, 1, 1, 0, 1);
            }),
            "fill_normal: a floating tensor expected, got int32");
}

}  // namespace
}  // namespace kiln
