// The optimizer over an expert-parallel rank's layout (expert_layout_steps.h) on the GPU,
// where the CUDA kernel walks the segment table in order.
#include <gtest/gtest.h>

#include "trainer/optim/expert_layout_steps.h"

namespace kiln {
namespace {

TEST(AdamWLayoutCuda, EveryParameterOfAnExpertParallelLayoutTakesItsStep) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  const auto ops = make_cuda_ops(0, AttentionChoice::Kiln);
  test::expect_every_parameter_steps(*ops);
}

}  // namespace
}  // namespace kiln
