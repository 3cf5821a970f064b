// The MPI communicator on 4 ranks (ctest runs `mpirun -np 4 mpi_tests`): every collective's
// result written down from the ranks' inputs, and groups split as ParallelLayout names them.
#include <gtest/gtest.h>

#include <vector>

#include "tests/error_of.h"
#include "trainer/parallel/gradient_buckets.h"
#include "trainer/parallel/layout.h"
#include "trainer/parallel/mpi_communicator.h"

namespace kiln {
namespace {

template <typename T>
Tensor host(std::vector<T>& v, DType dtype) {
  return {v.data(), dtype, {static_cast<int64_t>(v.size())}};
}

class MpiCommunicatorTest : public testing::Test {
 protected:
  void SetUp() override {
    comm_ = MpiSession::world();
    ASSERT_EQ(comm_->size(), 4) << "run under mpirun -np 4";
    r_ = comm_->rank();
  }
  std::unique_ptr<Communicator> comm_;
  int r_ = 0;
};

TEST_F(MpiCommunicatorTest, AllReduceSumsAndMaxes) {
  std::vector<float> x{1.0f * r_, 10.0f, -1.0f * r_};
  comm_->all_reduce(host(x, DType::F32), ReduceOp::Sum);
  EXPECT_EQ(x, (std::vector<float>{6, 40, -6}));
  std::vector<double> y{1.0 * r_, -1.0 * r_};
  comm_->all_reduce(host(y, DType::F64), ReduceOp::Max);
  EXPECT_EQ(y, (std::vector<double>{3, 0}));
  std::vector<int64_t> steps{r_ + int64_t{1}};
  comm_->all_reduce(host(steps, DType::I64), ReduceOp::Sum);
  EXPECT_EQ(steps[0], 10);
}

TEST_F(MpiCommunicatorTest, BroadcastGatherAndScatter) {
  std::vector<int32_t> decision{r_ == 2 ? 7 : 0, r_ == 2 ? 8 : 0};
  comm_->broadcast(host(decision, DType::I32), 2);
  EXPECT_EQ(decision, (std::vector<int32_t>{7, 8}));

  std::vector<float> mine{1.0f * r_, 100.0f + r_}, all(8, -1.0f);
  comm_->all_gather(host(all, DType::F32), host(mine, DType::F32));
  EXPECT_EQ(all, (std::vector<float>{0, 100, 1, 101, 2, 102, 3, 103}));

  std::vector<float> gathered(8, -1.0f);
  comm_->gather(host(gathered, DType::F32), host(mine, DType::F32), 0);
  if (r_ == 0) EXPECT_EQ(gathered, all);
  else EXPECT_EQ(gathered, std::vector<float>(8, -1.0f));  // untouched off the root

  // Each rank gives 1..8 scaled by its rank + 1; slice r of the sum is (1+2+3+4) x slice r.
  std::vector<float> full(8), shard(2);
  for (int i = 0; i < 8; ++i) full[static_cast<size_t>(i)] = static_cast<float>((i + 1) * (r_ + 1));
  comm_->reduce_scatter(host(shard, DType::F32), host(full, DType::F32));
  EXPECT_EQ(shard, (std::vector<float>{10.0f * (2 * r_ + 1), 10.0f * (2 * r_ + 2)}));
}

TEST_F(MpiCommunicatorTest, SendAndReceiveAroundARing) {
  std::vector<double> out{1.0 * r_}, in{-1.0};
  const int next = (r_ + 1) % 4, previous = (r_ + 3) % 4;
  // Even ranks send first, odd ones receive first: no rank waits on a rank that waits.
  if (r_ % 2 == 0) {
    comm_->send(host(out, DType::F64), next, 0);
    comm_->recv(host(in, DType::F64), previous, 0);
  } else {
    comm_->recv(host(in, DType::F64), previous, 0);
    comm_->send(host(out, DType::F64), next, 0);
  }
  EXPECT_EQ(in[0], previous);
  comm_->barrier();
}

TEST_F(MpiCommunicatorTest, StartedSendsMatchByTagAndKeepACopy) {
  // Every rank sends two messages round the ring, then overwrites its buffer at once; the
  // receiver takes them in the opposite order, by tag.
  std::vector<double> out{10.0 * r_};
  const int next = (r_ + 1) % 4, previous = (r_ + 3) % 4;
  auto first = comm_->start_send(host(out, DType::F64), next, 1);
  out[0] = 10.0 * r_ + 1;
  auto second = comm_->start_send(host(out, DType::F64), next, 2);
  out[0] = -1;
  std::vector<double> in2{0}, in1{0};
  comm_->recv(host(in2, DType::F64), previous, 2);
  comm_->recv(host(in1, DType::F64), previous, 1);
  first->wait();
  second->wait();
  EXPECT_EQ(in1[0], 10.0 * previous);
  EXPECT_EQ(in2[0], 10.0 * previous + 1);
  comm_->barrier();
}

TEST_F(MpiCommunicatorTest, GroupsSplitAsTheLayoutNamesThem) {
  // tp 2 x dp 2: tensor groups {0, 1}, {2, 3}; data groups {0, 2}, {1, 3}.
  ParallelConfig config;
  config.tp = 2;
  const ParallelLayout layout(config, 4);
  const auto tensor = comm_->split(layout.tensor_group(r_));
  const auto data = comm_->split(layout.data_group(r_));
  EXPECT_EQ(tensor->size(), 2);
  EXPECT_EQ(tensor->rank(), layout.coordinates(r_).tp);
  EXPECT_EQ(data->rank(), layout.coordinates(r_).dp);
  std::vector<float> x{1.0f * r_};
  tensor->all_reduce(host(x, DType::F32), ReduceOp::Sum);
  EXPECT_EQ(x[0], r_ < 2 ? 1.0f : 5.0f);
  std::vector<float> y{1.0f * r_};
  data->all_reduce(host(y, DType::F32), ReduceOp::Sum);
  EXPECT_EQ(y[0], r_ % 2 == 0 ? 2.0f : 4.0f);
}

TEST_F(MpiCommunicatorTest, GradientBucketsSumEveryBucketOverTheRanks) {
  // 10 elements in buckets of 4: [0, 4), [4, 8), [8, 10); rank r holds (r + 1) x (i + 1).
  std::vector<float> grads(10);
  for (int i = 0; i < 10; ++i) grads[static_cast<size_t>(i)] = static_cast<float>((r_ + 1) * (i + 1));
  GradientBuckets buckets(*comm_, host(grads, DType::F32), 4);
  EXPECT_EQ(buckets.buckets(), 3);
  buckets.ready(5);  // starts the first bucket only
  buckets.ready(9);  // and the second
  buckets.finish();  // the third, then waits
  for (int i = 0; i < 10; ++i) EXPECT_EQ(grads[static_cast<size_t>(i)], 10.0f * (i + 1)) << i;
}

TEST_F(MpiCommunicatorTest, AllToAllMovesEachRanksRowsToTheirRank) {
  // Rank r sends (r + q) % 3 rows of two values to rank q; row i of them holds
  // {100 r + 10 q + i, -1}. Rank q receives them from each rank r in rank order.
  const auto rows = [](int from, int to) { return int64_t{(from + to) % 3}; };
  std::vector<int64_t> send_rows, recv_rows;
  std::vector<float> in, expected;
  for (int q = 0; q < 4; ++q) {
    send_rows.push_back(rows(r_, q));
    recv_rows.push_back(rows(q, r_));
    for (int i = 0; i < rows(r_, q); ++i) in.insert(in.end(), {100.0f * r_ + 10.0f * q + i, -1.0f});
    for (int i = 0; i < rows(q, r_); ++i) expected.insert(expected.end(), {100.0f * q + 10.0f * r_ + i, -1.0f});
  }
  in.resize(in.size() + 2, 7.0f);  // a spare row is not sent
  std::vector<float> out(expected.size() + 2, 0.0f);
  const auto matrix = [](std::vector<float>& v) {
    return Tensor{v.data(), DType::F32, {static_cast<int64_t>(v.size() / 2), 2}};
  };
  comm_->all_to_all(matrix(out), recv_rows, matrix(in), send_rows);
  expected.insert(expected.end(), {0.0f, 0.0f});  // nor is a spare row received into
  EXPECT_EQ(out, expected);
}

TEST_F(MpiCommunicatorTest, AllToAllToAndFromARankWhoseExpertsDrewNoRows) {
  // Every rank sends row {r, q} to each rank q but the last, which gets nothing: it receives
  // into, and on the way back sends out of, a tensor of no rows, as a rank does whose
  // experts drew no tokens.
  const bool idle = r_ == 3;
  std::vector<int64_t> to_busy{1, 1, 1, 0}, from_all(4, idle ? 0 : 1);
  std::vector<float> rows, arrived(idle ? 0 : 8), back(6);
  for (int q = 0; q < 3; ++q) rows.insert(rows.end(), {float(r_), float(q)});
  const auto matrix = [](std::vector<float>& v) {
    return Tensor{v.data(), DType::F32, {static_cast<int64_t>(v.size() / 2), 2}};
  };
  comm_->all_to_all(matrix(arrived), from_all, matrix(rows), to_busy);
  for (int q = 0; q < 4 && !idle; ++q) {
    EXPECT_EQ(arrived[static_cast<size_t>(2 * q)], float(q));
    EXPECT_EQ(arrived[static_cast<size_t>(2 * q + 1)], float(r_));
  }
  comm_->all_to_all(matrix(back), to_busy, matrix(arrived), from_all);
  EXPECT_EQ(back, rows);
}

TEST_F(MpiCommunicatorTest, BadCallsAreRefusedInOneLine) {
  std::vector<uint16_t> half(2);
  EXPECT_EQ(test::error_of([&] { comm_->all_reduce(host(half, DType::BF16), ReduceOp::Sum); }),
            "all_reduce: MPI cannot add bf16 values");
  std::vector<float> small(3), one(1);
  EXPECT_EQ(test::error_of([&] { comm_->all_gather(host(small, DType::F32), host(one, DType::F32)); }),
            "all_gather: [3] fp32 cannot hold 4 x [1] fp32");
  EXPECT_EQ(test::error_of([&] {
              comm_->all_to_all(host(small, DType::F32), {1, 1}, host(small, DType::F32), {1, 1});
            }),
            "all_to_all: counts for 2 and 2 ranks in a group of 4");
  EXPECT_EQ(test::error_of([&] { comm_->split({(r_ + 1) % 4}); }),
            "split: rank " + std::to_string(r_) + " is not in the group it was given");
}

}  // namespace
}  // namespace kiln
