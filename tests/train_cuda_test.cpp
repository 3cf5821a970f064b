// 50 steps of the tiny config on the CPU and on the GPU: the loss curves agree within 2%.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

std::vector<double> losses(const std::string& output) {
  std::vector<double> out;
  const std::regex line(R"(^step +\d+/\d+ \| loss ([0-9.]+))");
  std::smatch match;
  size_t begin = 0;
  while (begin < output.size()) {
    const size_t end = output.find('\n', begin);
    const std::string text = output.substr(begin, end - begin);
    if (std::regex_search(text, match, line)) out.push_back(std::stod(match[1]));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return out;
}

TEST(TrainCuda, TinyConfigLossCurveMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  const std::string dir = fresh_dir("train_cuda");
  {
    std::ofstream text(dir + "/corpus.txt");
    for (int d = 0; d < 3000; ++d)
      text << "Verse " << d << ": and the earth brought forth grass, and herb yielding seed.\n\n";
  }
  const std::string kiln = kiln_binary();
  ASSERT_EQ(run_command(kiln + " data prepare --input " + dir + "/corpus.txt --tokenizer byte"
                        " --document-boundary blank-line --append-eod --output " + dir + "/corpus")
                .exit_code,
            0);
  const std::string common = kiln + " train --no-store --set 'data.paths=[\"" + dir +
                             "/corpus\"]' --set data.tokenizer=byte --set model.vocab_size=257"
                             " --set train.steps=50 --set train.log_interval=1"
                             " --set train.eval_interval=0 --set train.sample_tokens=0";
  const CommandResult cpu = run_command(common + " --set backend.device=cpu");
  const CommandResult gpu = run_command(common + " --set backend.device=cuda");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  const std::vector<double> a = losses(cpu.output), b = losses(gpu.output);
  ASSERT_EQ(a.size(), 50u);
  ASSERT_EQ(b.size(), 50u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(b[i] / a[i], 1.0, 0.02) << "step " << i + 1 << ": cpu " << a[i] << " cuda " << b[i];
}

}  // namespace
}  // namespace kiln::test
