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

// fp8 runs on the CPU as an emulation of the device's quantisation; bf16 and fp16 do not.
TEST(Backend, TheCpuEmulatesFp8AndRefusesTheHalfPrecisions) {
  Config c = on_cpu("kiln");
  c.precision.dtype = "fp8";
  EXPECT_EQ(make_ops(c, 0)->fp8_unsupported(), "");
  c.precision.dtype = "bf16";
  try {
    make_ops(c, 0);
    FAIL() << "precision.dtype=bf16 ran on the CPU";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "precision.dtype=bf16 needs backend.device=cuda; the CPU backend trains in fp32 (and "
                           "emulates fp8)");
  }
}

}  // namespace
}  // namespace kiln
