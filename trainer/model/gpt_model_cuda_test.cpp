// The whole model on the GPU against the CPU: same weights and tokens give the same loss
// and parameter gradients, for both architectures and Qwen3's normalised heads, in fp32 and in
// bf16, plain and with the document resets of rows that pack several documents.
#include <gtest/gtest.h>

#include <ostream>
#include <vector>

#include "tests/relative_error.h"
#include "tests/small_model.h"
#include "trainer/memory/host_copy.h"
#include "trainer/model/gpt_model.h"

namespace kiln {
namespace {

// "qwen3": llama with normalised query and key heads 128 wide (Qwen3's), not 256 / 4.
ModelConfig small_model(const std::string& arch) {
  ModelConfig m = test::small_model(arch == "qwen3" ? "llama" : arch, 256, 300, 64);  // head dim 64
  m.qk_norm = arch == "qwen3";
  m.explicit_head_dim = m.qk_norm ? 128 : 0;
  return m;
}

struct Case {
  std::string arch;
  DType dtype;
  double loss_tol, grad_tol;
  bool resets = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.arch << "/" << dtype_name(c.dtype) << (c.resets ? "/resets" : "");
}

class GpuModelParity : public testing::TestWithParam<Case> {};

TEST_P(GpuModelParity, LossAndGradientsMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  const Case c = GetParam();
  const ModelConfig config = small_model(c.arch);
  auto cpu_ops = make_cpu_ops(2);
  auto gpu_ops = make_cuda_ops(0, AttentionChoice::Auto);
  GptModel cpu(config, 2, *cpu_ops, DType::F32);
  GptModel gpu(config, 2, *gpu_ops, c.dtype);
  gpu.init_parameters(11);
  // The CPU starts from the GPU's weights (rounded to its dtype).
  for (size_t i = 0; i < cpu.parameters().all().size(); ++i)
    copy_from_doubles(*cpu_ops, cpu.parameters().all()[i].value,
                      copy_to_doubles(*gpu_ops, gpu.parameters().all()[i].value));

  std::vector<int32_t> tokens(2 * 64), targets(2 * 64);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 37 + 11) % 300);
    targets[i] = i % 17 == 5 ? -1 : static_cast<int32_t>((i * 53 + 7) % 300);
  }
  // Row 0 packs documents [0, 21), [21, 22) and [22, 64); row 1 [0, 41) and [41, 64).
  std::vector<int32_t> positions, starts;
  for (int32_t i = 0; i < 2 * 64; ++i) {
    const int32_t t = i % 64;
    const int32_t start = i < 64 ? (t < 21 ? 0 : t < 22 ? 21 : 22) : (t < 41 ? 0 : 41);
    starts.push_back(start);
    positions.push_back(t - start);
  }
  const DocumentResets resets =
      c.resets ? DocumentResets{positions.data(), starts.data()} : DocumentResets{};
  double losses[2];
  GptModel* models[2] = {&cpu, &gpu};
  for (int k = 0; k < 2; ++k) {
    models[k]->set_batch(tokens.data(), targets.data(), 2, 64, 0, resets);
    models[k]->zero_grad();
    losses[k] = models[k]->forward();
    models[k]->backward(1.0 / static_cast<double>(models[k]->target_count()));
  }
  EXPECT_NEAR(losses[1] / losses[0], 1.0, c.loss_tol);
  for (size_t i = 0; i < cpu.parameters().all().size(); ++i) {
    const Parameter& p = cpu.parameters().all()[i];
    const double error = test::relative_error(
        copy_to_doubles(*gpu_ops, gpu.parameters().all()[i].grad), copy_to_doubles(*cpu_ops, p.grad));
    EXPECT_LE(error, c.grad_tol) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ArchDtype, GpuModelParity,
    testing::Values(Case{"gpt2", DType::F32, 1e-5, 1e-4}, Case{"llama", DType::F32, 1e-5, 1e-4},
                    Case{"gpt2", DType::BF16, 1e-2, 5e-2}, Case{"llama", DType::BF16, 1e-2, 5e-2},
                    Case{"gpt2", DType::F32, 1e-5, 1e-4, true},
                    Case{"llama", DType::F32, 1e-5, 1e-4, true},
                    Case{"llama", DType::BF16, 1e-2, 5e-2, true}, Case{"qwen3", DType::F32, 1e-5, 1e-4},
                    Case{"qwen3", DType::BF16, 1e-2, 5e-2}, Case{"qwen3", DType::F32, 1e-5, 1e-4, true}),
    [](const auto& info) {
      return info.param.arch + "_" + std::string(dtype_name(info.param.dtype)) +
             (info.param.resets ? "_resets" : "");
    });

}  // namespace
}  // namespace kiln
