// End-to-end: the CPU backend's numbers do not depend on its thread count. A run whose core
// share changes (another run starts beside it, backend.threads), or that restarts on another
// machine, continues the same curve bit for bit: ten steps on 1, 2 and 3 threads write the same
// weights and optimizer state, byte for byte (docs/resilience.md).
#include <gtest/gtest.h>

#include <string>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

TEST(ThreadCount, TheSameStepsOnOneTwoAndThreeThreadsWriteTheSameBits) {
  const std::string dir = fresh_dir("thread_count");
  const std::string prefix = prepare_corpus(dir);
  std::string first;
  for (const int threads : {1, 2, 3}) {
    const std::string name = "t" + std::to_string(threads);
    // A llama and a gpt2 block between them: RoPE, RMSNorm, SwiGLU, grouped heads, LayerNorm,
    // GELU, biases, every product in both directions.
    for (const std::string arch : {"gpt2", "llama --set model.n_kv_head=1"}) {
      const CommandResult r = run_command(kiln + " train --no-store --name " + name + arch.substr(0, 4) + small_run(prefix) +
                                          " --set model.n_layer=2 --set train.steps=10 --set model.arch=" + arch +
                                          " --set backend.threads=" + std::to_string(threads));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    const std::string bits = run_command("cd " + dir + "/checkpoints && cat " + name +
                                         "gpt2/step-00000010/*.safetensors " + name +
                                         "llam/step-00000010/*.safetensors | sha256sum").output;
    if (threads == 1) first = bits;
    EXPECT_EQ(bits, first) << threads << " threads";
  }
}

}  // namespace
}  // namespace kiln::test
