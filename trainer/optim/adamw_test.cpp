// The optimizer over an expert-parallel rank's layout (expert_layout_steps.h) on the CPU.
#include <gtest/gtest.h>

#include "trainer/optim/expert_layout_steps.h"

namespace kiln {
namespace {

TEST(AdamWLayout, EveryParameterOfAnExpertParallelLayoutTakesItsStep) {
  const auto ops = make_cpu_ops(1);
  test::expect_every_parameter_steps(*ops);
}

}  // namespace
}  // namespace kiln
