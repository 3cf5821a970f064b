#include "trainer/train/backend.h"

#include <gtest/gtest.h>

#include "base/check.h"

namespace kiln {
namespace {

Config on_cpu(const std::string& attention) {
  Config c;
  c.backend.device = "cpu";
  c.backend.threads = 1;
  c.backend.attention = attention;
  return c;
}

// backend.attention picks CUDA kernels; the CPU runs kiln's whatever it says, but cudnn.
TEST(Backend, TheCpuComputesAttentionWithKilnsKernels) {
  for (const char* attention : {"auto", "kiln"})
    EXPECT_EQ(make_ops(on_cpu(attention), 0)->attention(), "kiln's kernels") << attention;
}

TEST(Backend, TheCpuRefusesCudnnAttentionInOneLine) {
  try {
    make_ops(on_cpu("cudnn"), 0);
    FAIL() << "backend.attention=cudnn ran on the CPU";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "backend.attention=cudnn needs a CUDA GPU, and backend.device=cpu runs on the "
                 "CPU, whose attention is kiln's kernels; use backend.attention=auto");
  }
}

}  // namespace
}  // namespace kiln
