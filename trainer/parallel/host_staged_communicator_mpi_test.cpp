// The host-staged device communicator on 4 ranks, with the CPU backend as its copier: tensors
// marked as on a GPU take the staged path (copied out, moved by MPI, copied back), as on a
// GPU run with parallel.device_comm=mpi; host tensors go to MPI as they are. bf16 and fp16
// sums are added in float and rounded back.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/half_convert.h"
#include "trainer/parallel/gradient_buckets.h"
#include "trainer/parallel/host_staged_communicator.h"
#include "trainer/parallel/layout.h"
#include "trainer/parallel/mpi_communicator.h"

namespace kiln {
namespace {

template <typename T>
Tensor staged(std::vector<T>& v, DType dtype) {
  return {v.data(), dtype, {static_cast<int64_t>(v.size())}, Device::Cuda};
}

template <typename T>
Tensor host_view(std::vector<T>& v, DType dtype) {
  return {v.data(), dtype, {static_cast<int64_t>(v.size())}};
}

class HostStagedTest : public testing::Test {
 protected:
  void SetUp() override {
    ops_ = make_cpu_ops(1);
    comm_ = make_host_staged_communicator(MpiSession::world(), *ops_);
    ASSERT_EQ(comm_->size(), 4) << "run under mpirun -np 4";
    r_ = comm_->rank();
  }
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<Communicator> comm_;
  int r_ = 0;
};

TEST_F(HostStagedTest, AllReducesDeviceTensorsOfEveryDtype) {
  std::vector<float> x{1.0f * r_, 10.0f};
  comm_->all_reduce(staged(x, DType::F32), ReduceOp::Sum);
  EXPECT_EQ(x, (std::vector<float>{6, 40}));
  // 1.5 + 2.5 + 3.5 + 4.5 = 12 and 0.25 x 4 = 1 are exact in bf16. 256 + 1 + 1 + 1 = 259 is
  // not: bf16 steps by 2 there, and the float sum rounds to the even 260.
  std::vector<uint16_t> b{float_to_bf16(1.5f + r_), float_to_bf16(0.25f),
                          float_to_bf16(r_ == 0 ? 256.0f : 1.0f)};
  comm_->all_reduce(staged(b, DType::BF16), ReduceOp::Sum);
  EXPECT_EQ(bf16_to_float(b[0]), 12.0f);
  EXPECT_EQ(bf16_to_float(b[1]), 1.0f);
  EXPECT_EQ(bf16_to_float(b[2]), 260.0f);
  std::vector<uint16_t> h{float_to_f16(0.5f * r_)};
  comm_->all_reduce(staged(h, DType::F16), ReduceOp::Max);
  EXPECT_EQ(f16_to_float(h[0]), 1.5f);
}

TEST_F(HostStagedTest, StartedAllReducesCopyBackWhenWaitedFor) {
  // Two buckets in flight at once, each with its own staging buffer.
  std::vector<float> a{1.0f * r_}, b{2.0f * r_, 1.0f};
  auto first = comm_->start_all_reduce(staged(a, DType::F32), ReduceOp::Sum);
  auto second = comm_->start_all_reduce(staged(b, DType::F32), ReduceOp::Sum);
  EXPECT_EQ(a[0], 1.0f * r_);  // the device tensor is written only at the wait
  second->wait();
  first->wait();
  first->wait();  // a second wait changes nothing
  EXPECT_EQ(a, (std::vector<float>{6}));
  EXPECT_EQ(b, (std::vector<float>{12, 4}));

  std::vector<float> grads(10);
  for (int i = 0; i < 10; ++i) grads[static_cast<size_t>(i)] = static_cast<float>((r_ + 1) * (i + 1));
  GradientBuckets buckets(*comm_, staged(grads, DType::F32), 4);
  buckets.ready(5);
  buckets.ready(9);
  buckets.finish();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(grads[static_cast<size_t>(i)], 10.0f * (i + 1)) << i;
}

TEST_F(HostStagedTest, BroadcastGathersAndScatters) {
  std::vector<uint16_t> bits{static_cast<uint16_t>(r_ == 2 ? 0xBEEF : 0)};
  comm_->broadcast(staged(bits, DType::BF16), 2);  // moved as bits
  EXPECT_EQ(bits[0], 0xBEEF);

  std::vector<float> mine{1.0f * r_, 100.0f + r_}, all(8, -1.0f);
  comm_->all_gather(staged(all, DType::F32), staged(mine, DType::F32));
  EXPECT_EQ(all, (std::vector<float>{0, 100, 1, 101, 2, 102, 3, 103}));

  std::vector<float> gathered(8, -1.0f);
  comm_->gather(staged(gathered, DType::F32), staged(mine, DType::F32), 1);
  if (r_ == 1) EXPECT_EQ(gathered, all);
  else EXPECT_EQ(gathered, std::vector<float>(8, -1.0f));

  // Slice r of the sum of (i + 1) x (rank + 1) over 4 ranks is 10 x (i + 1), in bf16 exactly.
  std::vector<uint16_t> full(8), shard(2);
  for (int i = 0; i < 8; ++i) full[static_cast<size_t>(i)] = float_to_bf16(static_cast<float>((i + 1) * (r_ + 1)));
  comm_->reduce_scatter(staged(shard, DType::BF16), staged(full, DType::BF16));
  EXPECT_EQ(bf16_to_float(shard[0]), 10.0f * (2 * r_ + 1));
  EXPECT_EQ(bf16_to_float(shard[1]), 10.0f * (2 * r_ + 2));
}

TEST_F(HostStagedTest, StartedSendsMatchByTagAndKeepACopy) {
  std::vector<double> out{10.0 * r_};
  const int next = (r_ + 1) % 4, previous = (r_ + 3) % 4;
  auto first = comm_->start_send(staged(out, DType::F64), next, 1);
  out[0] = 10.0 * r_ + 1;
  auto second = comm_->start_send(staged(out, DType::F64), next, 2);
  out[0] = -1;
  std::vector<double> in2{0}, in1{0};
  comm_->recv(staged(in2, DType::F64), previous, 2);
  comm_->recv(staged(in1, DType::F64), previous, 1);
  first->wait();
  second->wait();
  EXPECT_EQ(in1[0], 10.0 * previous);
  EXPECT_EQ(in2[0], 10.0 * previous + 1);
  comm_->barrier();
}

TEST_F(HostStagedTest, AllToAllMovesDeviceRowsAsBits) {
  // Rank r sends q + 1 bf16 rows of one value, 10 r + q, to rank q, and receives r + 1 rows
  // from each rank q, holding 10 q + r.
  std::vector<int64_t> send_rows, recv_rows;
  std::vector<uint16_t> in, expected;
  for (int q = 0; q < 4; ++q) {
    send_rows.push_back(q + 1);
    recv_rows.push_back(r_ + 1);
    in.insert(in.end(), static_cast<size_t>(q + 1), float_to_bf16(10.0f * r_ + q));
    expected.insert(expected.end(), static_cast<size_t>(r_ + 1), float_to_bf16(10.0f * q + r_));
  }
  std::vector<uint16_t> out(expected.size(), 0);
  comm_->all_to_all(staged(out, DType::BF16), recv_rows, staged(in, DType::BF16), send_rows);
  EXPECT_EQ(out, expected);
}

TEST_F(HostStagedTest, HostTensorsAndSplitGroupsWorkAsOverMpi) {
  std::vector<double> loss{1.0 * r_};
  comm_->all_reduce(host_view(loss, DType::F64), ReduceOp::Sum);
  EXPECT_EQ(loss[0], 6.0);

  ParallelConfig config;
  config.tp = 2;
  const ParallelLayout layout(config, 4);
  const auto tensor = comm_->split(layout.tensor_group(r_));
  EXPECT_EQ(tensor->rank(), layout.coordinates(r_).tp);
  EXPECT_NE(tensor->backend().find("staged through host memory"), std::string::npos) << tensor->backend();
  std::vector<uint16_t> y{float_to_bf16(1.0f * r_)};
  tensor->all_reduce(staged(y, DType::BF16), ReduceOp::Sum);
  EXPECT_EQ(bf16_to_float(y[0]), r_ < 2 ? 1.0f : 5.0f);
}

}  // namespace
}  // namespace kiln
