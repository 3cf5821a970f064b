// The NCCL communicator on one GPU, a world of one: the path a GPU run takes, every call
// through NCCL on the stream, and the results read back from the device.
#include "trainer/parallel/nccl_communicator.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/ops.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

class NcclCommunicatorTest : public testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    KILN_CUDA_CHECK(cudaSetDevice(0));
    KILN_CUDA_CHECK(cudaStreamCreate(&stream_));
    bootstrap_ = make_single_process_communicator();
    comm_ = make_nccl_communicator(*bootstrap_, stream_);
  }
  void TearDown() override {
    comm_.reset();
    for (void* p : buffers_) cudaFree(p);
    if (stream_) cudaStreamDestroy(stream_);
  }

  // A device tensor holding `values`.
  Tensor device(const std::vector<float>& values) {
    void* p = nullptr;
    KILN_CUDA_CHECK(cudaMalloc(&p, values.size() * sizeof(float)));
    buffers_.push_back(p);
    KILN_CUDA_CHECK(cudaMemcpy(p, values.data(), values.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
    return {p, DType::F32, {static_cast<int64_t>(values.size())}, Device::Cuda};
  }

  std::vector<float> host(const Tensor& t) {
    std::vector<float> values(static_cast<size_t>(t.numel()));
    KILN_CUDA_CHECK(cudaMemcpy(values.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost));
    return values;
  }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Communicator> bootstrap_, comm_;
  std::vector<void*> buffers_;
};

TEST_F(NcclCommunicatorTest, EveryCallOfAWorldOfOneGoesThroughNccl) {
  EXPECT_EQ(comm_->backend(), "nccl");
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->size(), 1);
  const std::vector<float> values{1.5f, -2.0f, 3.25f};
  const Tensor x = device(values);
  comm_->all_reduce(x, ReduceOp::Sum);
  comm_->all_reduce(x, ReduceOp::Max);
  comm_->start_all_reduce(x, ReduceOp::Sum)->wait();
  comm_->broadcast(x, 0);
  EXPECT_EQ(host(x), values);

  const Tensor out = device({0, 0, 0});
  comm_->all_gather(out, x);
  EXPECT_EQ(host(out), values);
  const Tensor shard = device({0, 0, 0});
  comm_->reduce_scatter(shard, x);
  EXPECT_EQ(host(shard), values);
  const Tensor gathered = device({0, 0, 0});
  comm_->gather(gathered, x, 0);
  EXPECT_EQ(host(gathered), values);
  const Tensor received = device({0, 0, 0});
  comm_->all_to_all(received, {2}, x, {2});
  EXPECT_EQ(host(received), (std::vector<float>{1.5f, -2.0f, 0.0f}));
  comm_->barrier();

  const auto group = comm_->split({0});
  EXPECT_EQ(group->size(), 1);
  group->all_reduce(x, ReduceOp::Sum);
  EXPECT_EQ(host(x), values);
}

TEST_F(NcclCommunicatorTest, HostTensorsAndBadShapesAreRefusedInOneLine) {
  std::vector<float> on_host(2);
  EXPECT_EQ(test::error_of([&] {
              comm_->all_reduce(Tensor{on_host.data(), DType::F32, {2}}, ReduceOp::Sum);
            }),
            "all_reduce: the NCCL communicator moves GPU tensors; a host tensor needs MPI");
  const Tensor small = device({0}), two = device({1, 2});
  EXPECT_EQ(test::error_of([&] { comm_->all_gather(small, two); }),
            "all_gather: [1] fp32 cannot hold 1 x [2] fp32");
  EXPECT_EQ(test::error_of([&] { comm_->split({1}); }),
            "split: rank 0 is not in the group it was given");
}

}  // namespace
}  // namespace kiln
