#include "trainer/parallel/communicator.h"

#include <algorithm>
#include <cstring>

#include "kernels/check.h"

namespace kiln {
namespace {

class Done final : public PendingCollective {
 public:
  void wait() override {}
};

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  void all_reduce(const Tensor&, ReduceOp) override {}
  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor&, ReduceOp) override {
    return std::make_unique<Done>();
  }
  void broadcast(const Tensor&, int root) override { check_root(root); }
  void all_gather(const Tensor& out, const Tensor& in) override { copy(out, in, "all_gather"); }
  void reduce_scatter(const Tensor& out, const Tensor& in) override {
    copy(out, in, "reduce_scatter");
  }
  void gather(const Tensor& out, const Tensor& in, int root) override {
    check_root(root);
    copy(out, in, "gather");
  }
  void send(const Tensor&, int peer, int) override { no_peer(peer); }
  void recv(const Tensor&, int peer, int) override { no_peer(peer); }
  std::unique_ptr<PendingCollective> start_send(const Tensor&, int peer, int) override {
    no_peer(peer);
  }
  void barrier() override {}
  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    KILN_CHECK(ranks == std::vector<int>{0}, "split: a world of one holds only rank 0");
    return std::make_unique<SingleProcess>();
  }

 private:
  static void copy(const Tensor& out, const Tensor& in, const char* what) {
    check_gather_shapes(out, in, 1, what);
    if (out.data != in.data) std::memcpy(out.data, in.data, in.bytes());
  }
  static void check_root(int root) {
    KILN_CHECK(root == 0, "communicator: root " + std::to_string(root) + " in a world of one");
  }
  [[noreturn]] static void no_peer(int peer) {
    fail("communicator: no peer " + std::to_string(peer) + " in a world of one");
  }
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcess>();
}

SplitKey split_key(const std::vector<int>& ranks, int rank) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank);
  KILN_CHECK(me != ranks.end(),
             "split: rank " + std::to_string(rank) + " is not in the group it was given");
  return {*std::min_element(ranks.begin(), ranks.end()), static_cast<int>(me - ranks.begin())};
}

void check_gather_shapes(const Tensor& out, const Tensor& in, int size, const char* what) {
  KILN_CHECK(out.dtype == in.dtype && out.numel() == in.numel() * size,
             std::string(what) + ": " + out.shape.str() + " " + dtype_name(out.dtype) +
                 " cannot hold " + std::to_string(size) + " x " + in.shape.str() + " " +
                 dtype_name(in.dtype));
}

}  // namespace kiln
