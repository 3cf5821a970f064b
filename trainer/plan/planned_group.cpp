#include "trainer/plan/planned_group.h"

#include <string>

#include "base/check.h"

namespace kiln {
namespace {

class PlannedGroup final : public Communicator {
 public:
  PlannedGroup(int size, int rank) : size_(size), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "planned"; }
  void all_reduce(const Tensor&, ReduceOp) override { refuse("all_reduce"); }
  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor&, ReduceOp) override { refuse("all_reduce"); }
  void broadcast(const Tensor&, int) override { refuse("broadcast"); }
  std::unique_ptr<PendingCollective> start_all_gather(const Tensor&, const Tensor&) override {
    refuse("all_gather");
  }
  std::unique_ptr<PendingCollective> start_reduce_scatter(const Tensor&, const Tensor&) override {
    refuse("reduce_scatter");
  }
  void gather(const Tensor&, const Tensor&, int) override { refuse("gather"); }
  void send(const Tensor&, int, int) override { refuse("send"); }
  void recv(const Tensor&, int, int) override { refuse("recv"); }
  std::unique_ptr<PendingCollective> start_send(const Tensor&, int, int) override { refuse("send"); }
  std::unique_ptr<PendingCollective> start_send_recv(const Tensor&, int, const Tensor&, int) override {
    refuse("send_recv");
  }
  void all_to_all(const Tensor&, const std::vector<int64_t>&, const Tensor&, const std::vector<int64_t>&) override {
    refuse("all_to_all");
  }
  void barrier() override { refuse("barrier"); }
  std::unique_ptr<Communicator> split(const std::vector<int>&) override { refuse("split"); }

 private:
  [[noreturn]] static void refuse(const char* what) {
    fail(std::string(what) + ": a planned group moves no data");
  }
  int size_, rank_;
};

}  // namespace

std::unique_ptr<Communicator> make_planned_group(int size, int rank) {
  KILN_CHECK(size >= 1 && rank >= 0 && rank < size, "a planned group of " + std::to_string(size) +
                                                        " ranks has no rank " + std::to_string(rank));
  return std::make_unique<PlannedGroup>(size, rank);
}

}  // namespace kiln
