// A model initialised on the GPU holds the CPU model's parameters bit for bit: in fp32 the same
// values, in bf16 and fp16 the CPU's fp32 values rounded to nearest even (copy_from_doubles'
// rounding), for both architectures with MoE layers, untied heads and vocabulary padding. So a
// CPU/GPU parity test can initialise each side from the seed and compare the same model.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "kernels/half_convert.h"
#include "tests/small_model.h"
#include "trainer/memory/host_copy.h"
#include "trainer/model/gpt_model.h"

namespace kiln {
namespace {

struct Case {
  std::string arch;
  DType dtype;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.arch << "/" << dtype_name(c.dtype); }

class GpuInit : public testing::TestWithParam<Case> {};

// The CPU's fp32 value as the GPU's dtype holds it.
double rounded(double cpu, DType dtype) {
  const float f = static_cast<float>(cpu);
  if (dtype == DType::BF16) return bf16_to_float(float_to_bf16(f));
  if (dtype == DType::F16) return f16_to_float(float_to_f16(f));
  return f;
}

TEST_P(GpuInit, ParametersAreTheCpusBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  const Case c = GetParam();
  ModelConfig config = test::small_model(c.arch, 256, 300, 64);
  config.make_vocab_size_divisible_by = 128;  // 300 -> 384: padding rows
  config.moe.num_experts = 4;
  config.moe.top_k = 2;
  config.moe.ffn_hidden = 128;
  auto cpu_ops = make_cpu_ops(2);
  auto gpu_ops = make_cuda_ops(0, AttentionChoice::Kiln);
  GptModel cpu(config, 1, *cpu_ops, DType::F32);
  GptModel gpu(config, 1, *gpu_ops, c.dtype);
  cpu.init_parameters(2024);
  gpu.init_parameters(2024);
  for (size_t i = 0; i < cpu.parameters().all().size(); ++i) {
    const Parameter& p = cpu.parameters().all()[i];
    std::vector<double> want = copy_to_doubles(*cpu_ops, p.value);
    for (double& v : want) v = rounded(v, c.dtype);
    EXPECT_EQ(copy_to_doubles(*gpu_ops, gpu.parameters().all()[i].value), want) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(ArchDtype, GpuInit,
                         testing::Values(Case{"gpt2", DType::F32}, Case{"llama", DType::F32},
                                         Case{"gpt2", DType::BF16}, Case{"llama", DType::BF16},
                                         Case{"llama", DType::F16}),
                         [](const auto& info) {
                           return info.param.arch + "_" + std::string(dtype_name(info.param.dtype));
                         });

}  // namespace
}  // namespace kiln
