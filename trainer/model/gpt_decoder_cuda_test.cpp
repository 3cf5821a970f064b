// The decoder on the GPU against the decoder on the CPU, for both architectures and Qwen3's
// normalised heads, in fp32
// and bf16: the same weights fed a prompt and then single tokens give the same logits at
// each step, and again after a reset.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <vector>

#include "tests/small_model.h"
#include "trainer/memory/host_copy.h"
#include "trainer/model/gpt_decoder.h"

namespace kiln {
namespace {

// "qwen3": llama with normalised query and key heads 128 wide (Qwen3's), not 256 / 4. "mla":
// DeepSeek's latent attention, its cache rows 128 + 32 wide (heads of 48 + 32, values 48);
// "mla_wide": rows of DeepSeek-V3's 512 + 64.
ModelConfig decoder_model(const std::string& arch) {
  const bool llama = arch == "qwen3" || arch.starts_with("mla");
  ModelConfig m = test::small_model(llama ? "llama" : arch, 256, 300, 64);  // head dim 64
  m.qk_norm = arch == "qwen3";
  m.explicit_head_dim = m.qk_norm ? 128 : 0;
  if (arch == "mla") test::use_latent_attention(m, 96, 128, 48, 32, 48);
  if (arch == "mla_wide") test::use_latent_attention(m, 96, 512, 48, 64, 48);
  return m;
}

// ||a - b|| / ||b||.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

struct Case {
  std::string arch;
  DType dtype;
  double tolerance;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.arch << "/" << dtype_name(c.dtype); }

class GpuDecoder : public testing::TestWithParam<Case> {};

TEST_P(GpuDecoder, LogitsMatchTheCpuAtEveryStep) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  const Case c = GetParam();
  auto cpu_ops = make_cpu_ops(2);
  auto gpu_ops = make_cuda_ops(0, AttentionChoice::Auto);
  GptModel cpu(decoder_model(c.arch), 1, *cpu_ops, DType::F32);
  GptModel gpu(decoder_model(c.arch), 1, *gpu_ops, c.dtype);
  gpu.init_parameters(23);
  for (size_t i = 0; i < cpu.parameters().all().size(); ++i)
    copy_from_doubles(*cpu_ops, cpu.parameters().all()[i].value,
                      copy_to_doubles(*gpu_ops, gpu.parameters().all()[i].value));

  GptDecoder on_cpu(cpu), on_gpu(gpu);
  std::vector<int32_t> prompt(21);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 41 + 3) % 300);
  on_cpu.feed(prompt.data(), 21);
  on_gpu.feed(prompt.data(), 21);
  std::vector<float> want, got;
  for (int32_t step = 0; step < 10; ++step) {
    on_cpu.logits(0, want);
    on_gpu.logits(0, got);
    EXPECT_LE(relative_error(got, want), c.tolerance) << "position " << 20 + step;
    const int32_t next = (step * 97 + 5) % 300;
    on_cpu.feed(&next, 1);
    on_gpu.feed(&next, 1);
  }

  // After reset() both start again at position 0.
  on_cpu.reset();
  on_gpu.reset();
  on_cpu.feed(prompt.data() + 5, 16);
  on_gpu.feed(prompt.data() + 5, 16);
  on_cpu.logits(0, want);
  on_gpu.logits(0, got);
  EXPECT_LE(relative_error(got, want), c.tolerance) << "after reset";
}

INSTANTIATE_TEST_SUITE_P(ArchDtype, GpuDecoder,
                         testing::Values(Case{"gpt2", DType::F32, 1e-5},
                                         Case{"llama", DType::F32, 1e-5},
                                         Case{"gpt2", DType::BF16, 5e-2},
                                         Case{"llama", DType::BF16, 5e-2},
                                         Case{"qwen3", DType::F32, 1e-5},
                                         Case{"qwen3", DType::BF16, 5e-2},
                                         Case{"mla", DType::F32, 1e-5},
                                         Case{"mla", DType::BF16, 5e-2},
                                         Case{"mla_wide", DType::F32, 1e-5}),
                         [](const auto& info) {
                           return info.param.arch + "_" + std::string(dtype_name(info.param.dtype));
                         });

}  // namespace
}  // namespace kiln
