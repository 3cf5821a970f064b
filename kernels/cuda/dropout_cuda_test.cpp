// Ops::dropout on the GPU against the CPU body: bit for bit in fp32 (the same keeps, the same
// rounded product and sum), and in bf16 and fp16 each element the CPU's float formula rounded
// once to the type, over a tensor whose mask indices pass 2^32 (the counter's second word) and
// a context-parallel rank's two runs of a row-parallel rank's columns.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dropout_mask.h"
#include "kernels/half_convert.h"
#include "kernels/ops.h"
#include "tests/normal_values.h"

namespace kiln {
namespace {

constexpr int64_t kRows = 4096, kCols = 1100;  // 8 sequences of 512 tokens

DropoutMask test_mask() {
  DropoutMask m;
  m.p = 0.15;
  m.seed = 77;
  m.stream = 0x5EEDull << 32;
  m.first_sample = 1000;  // (1000 * 2048 + place) * 4400 + feature: past 2^32
  m.tokens = 512;
  m.seq_len = 2048;
  m.run = 256;
  m.starts[0] = 256;
  m.starts[1] = 1536;
  m.first_feature = 2200;
  m.features = 4400;
  return m;
}

uint16_t to_half_bits(DType dtype, float v) { return dtype == DType::BF16 ? float_to_bf16(v) : float_to_f16(v); }
float from_half_bits(DType dtype, uint16_t b) { return dtype == DType::BF16 ? bf16_to_float(b) : f16_to_float(b); }

class CudaDropout : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    gpu_ = make_cuda_ops(0, AttentionChoice::Kiln);
  }

  // The GPU's out after dropout(out, x) from out = start, as bytes.
  std::vector<unsigned char> on_gpu(const std::vector<unsigned char>& x, const std::vector<unsigned char>& start,
                                    bool accumulate) {
    const DType dtype = GetParam();
    const Tensor dx{gpu_->allocate(x.size()), dtype, {kRows, kCols}, Device::Cuda};
    const Tensor dout{gpu_->allocate(x.size()), dtype, {kRows, kCols}, Device::Cuda};
    gpu_->copy_from_host(dx, x.data());
    gpu_->copy_from_host(dout, start.data());
    gpu_->dropout(dout, dx, test_mask(), accumulate);
    std::vector<unsigned char> out(x.size());
    gpu_->copy_to_host(out.data(), dout);
    gpu_->release(dx.data);
    gpu_->release(dout.data);
    return out;
  }

  std::unique_ptr<Ops> cpu_ = make_cpu_ops(4);
  std::unique_ptr<Ops> gpu_;
};

TEST_P(CudaDropout, EachElementIsTheCpusFormula) {
  const DType dtype = GetParam();
  const std::vector<float> x = test::normal_values(kRows * kCols, 1, 1), start = test::normal_values(kRows * kCols, 1, 2);
  for (const bool accumulate : {false, true}) {
    // The CPU's fp32 body; the halves are rounded from the float formula at their own inputs.
    std::vector<float> want = start;
    std::vector<unsigned char> xb(x.size() * dtype_size(dtype)), sb(xb.size()), wb(xb.size());
    if (dtype == DType::F32) {
      cpu_->dropout({want.data(), DType::F32, {kRows, kCols}, Device::Cpu},
                    {const_cast<float*>(x.data()), DType::F32, {kRows, kCols}, Device::Cpu}, test_mask(), accumulate);
      std::memcpy(xb.data(), x.data(), xb.size());
      std::memcpy(sb.data(), start.data(), sb.size());
      std::memcpy(wb.data(), want.data(), wb.size());
    } else {
      const DropoutMask mask = test_mask();
      std::vector<uint16_t> xh(x.size()), sh(x.size()), wh(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        xh[i] = to_half_bits(dtype, x[i]);
        sh[i] = to_half_bits(dtype, start[i]);
        const int64_t row = static_cast<int64_t>(i) / kCols, col = static_cast<int64_t>(i) % kCols;
        // volatile: the product is rounded before the sum, as on the device (no fused multiply-add).
        const volatile float kept = mask.keep(row, col) ? from_half_bits(dtype, xh[i]) * mask.factor() : 0.0f;
        wh[i] = to_half_bits(dtype, accumulate ? from_half_bits(dtype, sh[i]) + kept : kept);
      }
      std::memcpy(xb.data(), xh.data(), xb.size());
      std::memcpy(sb.data(), sh.data(), sb.size());
      std::memcpy(wb.data(), wh.data(), wb.size());
    }
    const std::vector<unsigned char> got = on_gpu(xb, sb, accumulate);
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != wb[i];
    EXPECT_EQ(differ, 0u) << "bytes differ (accumulate " << accumulate << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtype, CudaDropout, testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kiln
