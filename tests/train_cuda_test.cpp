// 50 steps of the tiny config on the CPU and on the GPU: the loss curves agree within 2%.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/ops.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

TEST(TrainCuda, TinyConfigLossCurveMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  const std::string dir = fresh_dir("train_cuda");
  const std::string prefix = prepare_verses(dir);
  const std::string kiln = kiln_binary();
  const std::string common = kiln + " train --no-store --set 'data.paths=[\"" + prefix +
                             "\"]' --set data.tokenizer=byte --set model.vocab_size=257"
                             " --set train.steps=50 --set train.log_interval=1"
                             " --set train.eval_interval=0 --set train.sample_tokens=0";
  const CommandResult cpu = run_command(common + " --set backend.device=cpu");
  const CommandResult gpu = run_command(common + " --set backend.device=cuda");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  const std::vector<double> a = step_losses(cpu.output), b = step_losses(gpu.output);
  ASSERT_EQ(a.size(), 50u);
  ASSERT_EQ(b.size(), 50u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(b[i] / a[i], 1.0, 0.02) << "step " << i + 1 << ": cpu " << a[i] << " cuda " << b[i];
}

}  // namespace
}  // namespace kiln::test
