#include "trainer/parallel/communicator.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/error_of.h"
#include "trainer/parallel/gradient_buckets.h"

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
  // A world of one sends its rows to itself: the first send_rows[0] rows of in.
  std::vector<float> rows{1, 2, 3, 4, 5, 6}, received(6, 0.0f);
  comm->all_to_all(Tensor{received.data(), DType::F32, {3, 2}}, {2},
                   Tensor{rows.data(), DType::F32, {3, 2}}, {2});
  EXPECT_EQ(received, (std::vector<float>{1, 2, 3, 4, 0, 0}));
  EXPECT_EQ(test::error_of([&] {
              comm->all_to_all(Tensor{received.data(), DType::F32, {3, 2}}, {4},
                               Tensor{rows.data(), DType::F32, {3, 2}}, {4});
            }),
            "all_to_all: 4 rows out of [3, 2] and 4 rows into [3, 2]");
  // A rank whose experts drew no tokens sends out of, or receives into, a tensor of no rows.
  comm->all_to_all(Tensor{received.data(), DType::F32, {3, 2}}, {0}, Tensor{rows.data(), DType::F32, {0, 2}}, {0});
  comm->all_to_all(Tensor{received.data(), DType::F32, {0, 2}}, {0}, Tensor{rows.data(), DType::F32, {3, 2}}, {0});
  EXPECT_EQ(test::error_of([&] {
              comm->all_to_all(Tensor{received.data(), DType::F32, {3, 2}}, {1},
                               Tensor{rows.data(), DType::F32, {0, 2}}, {1});
            }),
            "all_to_all: 1 rows out of [0, 2] and 1 rows into [3, 2]");
  EXPECT_EQ(comm->split({0})->size(), 1);
  EXPECT_EQ(test::error_of([&] { comm->send(t, 1, 0); }),
            "communicator: no peer 1 in a world of one");
  EXPECT_EQ(test::error_of([&] { comm->broadcast(t, 2); }),
            "communicator: root 2 in a world of one");
}

TEST(GradientBuckets, CutTheBufferAndFoldAShortTail) {
  const auto comm = make_single_process_communicator();
  std::vector<float> grads(10);
  const Tensor t{grads.data(), DType::F32, {10}};
  EXPECT_EQ(GradientBuckets(*comm, t, 4).buckets(), 3);    // 4, 4, 2
  EXPECT_EQ(GradientBuckets(*comm, t, 6).buckets(), 2);    // 6, 4: half a bucket goes alone
  EXPECT_EQ(GradientBuckets(*comm, t, 100).buckets(), 1);  // one bucket holds it all
  EXPECT_EQ(GradientBuckets(*comm, t, 9).buckets(), 1);    // a tail of 1 joins the first
}

}  // namespace
}  // namespace kiln
