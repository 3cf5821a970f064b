#include "trainer/parallel/group_communicator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/error_of.h"

namespace kiln {
namespace {

struct NothingPending final : PendingCollective {
  void wait() override {}
};

// A world of one that writes down each call it gets, as "<name>.<call>".
class Recording final : public Communicator {
 public:
  Recording(std::string name, std::vector<std::string>& calls, int size = 1)
      : name_(std::move(name)), calls_(calls), size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::string backend() const override { return name_; }
  void all_reduce(const Tensor&, ReduceOp) override { note("all_reduce"); }
  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor&, ReduceOp) override {
    note("start_all_reduce");
    return nullptr;
  }
  void broadcast(const Tensor&, int) override { note("broadcast"); }
  std::unique_ptr<PendingCollective> start_all_gather(const Tensor&, const Tensor&) override {
    note("all_gather");
    return std::make_unique<NothingPending>();
  }
  std::unique_ptr<PendingCollective> start_reduce_scatter(const Tensor&, const Tensor&) override {
    note("reduce_scatter");
    return std::make_unique<NothingPending>();
  }
  void gather(const Tensor&, const Tensor&, int) override { note("gather"); }
  void all_to_all(const Tensor&, const std::vector<int64_t>&, const Tensor&,
                  const std::vector<int64_t>&) override {
    note("all_to_all");
  }
  void send(const Tensor&, int, int) override { note("send"); }
  void recv(const Tensor&, int, int) override { note("recv"); }
  std::unique_ptr<PendingCollective> start_send(const Tensor&, int, int) override {
    note("start_send");
    return nullptr;
  }
  std::unique_ptr<PendingCollective> start_send_recv(const Tensor&, int, const Tensor&, int) override {
    note("start_send_recv");
    return nullptr;
  }
  void barrier() override { note("barrier"); }
  std::unique_ptr<Communicator> split(const std::vector<int>&) override {
    note("split");
    return std::make_unique<Recording>(name_ + "'", calls_);
  }

 private:
  void note(const std::string& call) { calls_.push_back(name_ + "." + call); }
  std::string name_;
  std::vector<std::string>& calls_;
  int size_;
};

TEST(GroupCommunicator, HostTensorsGoToTheHostOneAndGpuTensorsToTheDeviceOne) {
  std::vector<std::string> calls;
  auto group = make_group_communicator(std::make_unique<Recording>("mpi", calls),
                                       std::make_unique<Recording>("nccl", calls));
  float value = 0;
  const Tensor on_host{&value, DType::F32, {1}}, on_gpu{&value, DType::F32, {1}, Device::Cuda};
  for (const Tensor& t : {on_host, on_gpu}) {
    group->all_reduce(t, ReduceOp::Sum);
    group->start_all_reduce(t, ReduceOp::Sum);
    group->broadcast(t, 0);
    group->all_gather(t, t);
    group->reduce_scatter(t, t);
    group->gather(t, t, 0);
    group->all_to_all(t, {1}, t, {1});
    group->send(t, 0, 0);
    group->recv(t, 0, 0);
    group->start_send(t, 0, 0);
    group->start_send_recv(t, 0, t, 0);
  }
  const std::vector<std::string> each = {"all_reduce", "start_all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                         "gather",     "all_to_all",       "send",      "recv",
                                         "start_send", "start_send_recv"};
  std::vector<std::string> expected;
  for (const char* comm : {"mpi.", "nccl."})
    for (const std::string& call : each) expected.push_back(comm + call);
  EXPECT_EQ(calls, expected);

  // A barrier holds both kinds of work; a split makes a group of both.
  calls.clear();
  group->barrier();
  auto split = group->split({0});
  split->all_reduce(on_gpu, ReduceOp::Sum);
  split->all_reduce(on_host, ReduceOp::Sum);
  EXPECT_EQ(calls, (std::vector<std::string>{"nccl.barrier", "mpi.barrier", "mpi.split", "nccl.split",
                                             "nccl'.all_reduce", "mpi'.all_reduce"}));
  EXPECT_EQ(split->backend(), "mpi' + nccl'");
}

TEST(GroupCommunicator, RefusesCommunicatorsOfDifferentRanks) {
  std::vector<std::string> calls;
  EXPECT_EQ(test::error_of([&] {
              make_group_communicator(std::make_unique<Recording>("mpi", calls),
                                      std::make_unique<Recording>("nccl", calls, 2));
            }),
            "a group's host and device communicators span different ranks");
}

}  // namespace
}  // namespace kiln
