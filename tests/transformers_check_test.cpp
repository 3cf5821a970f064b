// tests/parity/transformers_check.py, which holds `kiln export`'s models to transformers'
// predictions, runs here to its end: kiln's side (five tiny models trained, exported,
// evaluated and sampled greedily) always, and then either the comparison, where Python has
// torch and transformers, or its one-line skip, where it has not (Debian packages neither;
// the GPU machine's Python has both, bench/gpu-queue.md).
#include <gtest/gtest.h>

#include <string>

#include "tests/run_command.h"

namespace kiln::test {
namespace {

TEST(TransformersCheck, RunsKilnsSideThenComparesOrSaysWhyNot) {
  const std::string dir = fresh_dir("transformers_check");
  // Debian's Python, as the PyTorch parity tests run (python3-torch, no transformers).
  const CommandResult r = run_command("/usr/bin/python3 " + std::string(KILN_SOURCE_DIR) +
                                      "/tests/parity/transformers_check.py --kiln " + KILN_BINARY + " --dir " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* arch : {"gpt2", "llama", "mixtral", "qwen3_moe", "deepseek_v3"})
    EXPECT_NE(r.output.find("transformers check: " + std::string(arch) + ": kiln eval loss "), std::string::npos)
        << r.output;
  const bool compared = r.output.find("transformers check: passed (gpt2, llama, mixtral, qwen3_moe, deepseek_v3)") != std::string::npos;
  const bool skipped = r.output.find("transformers check: skipped: ") != std::string::npos;
  EXPECT_TRUE(compared || skipped) << r.output;
}

}  // namespace
}  // namespace kiln::test
