#include "trainer/parallel/communicator.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/error_of.h"

namespace kiln {
namespace {

TEST(SingleProcessCommunicator, CollectivesOfOneLeaveTheDataAsItIs) {
  const auto comm = make_single_process_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  std::vector<float> x{1.5f, -2.0f}, out(2, 0.0f);
  const Tensor t{x.data(), DType::F32, {2}}, o{out.data(), DType::F32, {2}};
  comm->all_reduce(t, ReduceOp::Sum);
  comm->broadcast(t, 0);
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
  comm->all_gather(o, t);
  EXPECT_EQ(out, x);
  out.assign(2, 0.0f);
  comm->reduce_scatter(o, t);
  EXPECT_EQ(out, x);
  EXPECT_EQ(comm->split({0})->size(), 1);
  EXPECT_EQ(test::error_of([&] { comm->send(t, 1); }),
            "communicator: no peer 1 in a world of one");
  EXPECT_EQ(test::error_of([&] { comm->broadcast(t, 2); }),
            "communicator: root 2 in a world of one");
}

}  // namespace
}  // namespace kiln
