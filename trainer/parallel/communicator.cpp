#include "trainer/parallel/communicator.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

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
  std::unique_ptr<PendingCollective> start_all_gather(const Tensor& out, const Tensor& in) override {
    copy(out, in, "all_gather");
    return std::make_unique<Done>();
  }
  std::unique_ptr<PendingCollective> start_reduce_scatter(const Tensor& out, const Tensor& in) override {
    copy(out, in, "reduce_scatter");
    return std::make_unique<Done>();
  }
  void gather(const Tensor& out, const Tensor& in, int root) override {
    check_root(root);
    copy(out, in, "gather");
  }
  void all_to_all(const Tensor& out, const std::vector<int64_t>& recv_rows, const Tensor& in,
                  const std::vector<int64_t>& send_rows) override {
    const int64_t row = check_all_to_all(out, recv_rows, in, send_rows, 1);
    if (out.data != in.data)
      std::memmove(out.data, in.data, static_cast<size_t>(send_rows[0] * row) * dtype_size(in.dtype));
  }
  void send(const Tensor&, int peer, int) override { no_peer(peer); }
  void recv(const Tensor&, int peer, int) override { no_peer(peer); }
  std::unique_ptr<PendingCollective> start_send(const Tensor&, int peer, int) override {
    no_peer(peer);
  }
  std::unique_ptr<PendingCollective> start_send_recv(const Tensor& x, int to, const Tensor& y, int from) override {
    if (to != 0) no_peer(to);
    if (from != 0) no_peer(from);
    copy(y, x, "send_recv");
    return std::make_unique<Done>();
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

int64_t check_all_to_all(const Tensor& out, const std::vector<int64_t>& recv_rows, const Tensor& in,
                         const std::vector<int64_t>& send_rows, int size) {
  KILN_CHECK(static_cast<int>(send_rows.size()) == size && static_cast<int>(recv_rows.size()) == size,
             "all_to_all: counts for " + std::to_string(send_rows.size()) + " and " +
                 std::to_string(recv_rows.size()) + " ranks in a group of " + std::to_string(size));
  KILN_CHECK(in.dtype == out.dtype, "all_to_all: sends " + std::string(dtype_name(in.dtype)) +
                                        " rows into a " + dtype_name(out.dtype) + " tensor");
  // A side without rows (a rank whose experts drew no tokens) takes the other side's width.
  const auto width = [](const Tensor& x) { return x.shape.rank > 0 && x.shape[0] > 0 ? x.numel() / x.shape[0] : -1; };
  const int64_t in_row = width(in), out_row = width(out);
  KILN_CHECK(in_row < 0 || out_row < 0 || in_row == out_row,
             "all_to_all: rows of " + std::to_string(in_row) + " and " + std::to_string(out_row) + " elements");
  const int64_t row = std::max<int64_t>({in_row, out_row, 0});
  int64_t sent = 0, received = 0;
  for (int q = 0; q < size; ++q) {
    KILN_CHECK(send_rows[static_cast<size_t>(q)] >= 0 && recv_rows[static_cast<size_t>(q)] >= 0,
               "all_to_all: a negative count of rows");
    sent += send_rows[static_cast<size_t>(q)];
    received += recv_rows[static_cast<size_t>(q)];
  }
  KILN_CHECK((sent == 0 || in_row > 0) && (received == 0 || out_row > 0) && sent * row <= in.numel() &&
                 received * row <= out.numel(),
             "all_to_all: " + std::to_string(sent) + " rows out of " + in.shape.str() + " and " +
                 std::to_string(received) + " rows into " + out.shape.str());
  return row;
}

}  // namespace kiln
