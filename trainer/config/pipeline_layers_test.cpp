#include "trainer/config/pipeline_layers.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/error_of.h"

namespace kiln {
namespace {

using test::error_of;

TEST(PipelineLayers, SplitEvenlyOrAsToldAtTheEnds) {
  EXPECT_EQ(pipeline_layers(12, 4, 1, 0, 0), (std::vector<int>{3, 3, 3, 3}));
  EXPECT_EQ(pipeline_layers(8, 2, 2, 0, 0), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(pipeline_layers(10, 4, 1, 1, 0), (std::vector<int>{1, 3, 3, 3}));
  EXPECT_EQ(pipeline_layers(10, 4, 1, 2, 2), (std::vector<int>{2, 3, 3, 2}));
  EXPECT_EQ(pipeline_layers(5, 2, 1, 2, 3), (std::vector<int>{2, 3}));
  EXPECT_EQ(pipeline_layers(7, 1, 1, 0, 0), (std::vector<int>{7}));
  EXPECT_EQ(error_of([] { pipeline_layers(10, 4, 1, 0, 0); }),
            "pipeline: model.n_layer=10 leaves 10 layers, which do not split evenly over the "
            "other 4 of pp x vpp = 4 x 1 = 4 stages (each needs one or more)");
  EXPECT_EQ(error_of([] { pipeline_layers(4, 1, 1, 2, 0); }),
            "pipeline: first and last stage layers need more than one stage");
}

}  // namespace
}  // namespace kiln
