#include "trainer/parallel/group_communicator.h"

#include <utility>

#include "base/check.h"

namespace kiln {
namespace {

class GroupCommunicator final : public Communicator {
 public:
  GroupCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> device)
      : host_(std::move(host)), device_(std::move(device)) {
    KILN_CHECK(host_->size() == device_->size() && host_->rank() == device_->rank(),
               "a group's host and device communicators span different ranks");
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string backend() const override { return host_->backend() + " + " + device_->backend(); }

  void all_reduce(const Tensor& x, ReduceOp op) override { on(x).all_reduce(x, op); }
  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& x, ReduceOp op) override {
    return on(x).start_all_reduce(x, op);
  }
  void broadcast(const Tensor& x, int root) override { on(x).broadcast(x, root); }
  std::unique_ptr<PendingCollective> start_all_gather(const Tensor& out, const Tensor& in) override {
    return on(in).start_all_gather(out, in);
  }
  std::unique_ptr<PendingCollective> start_reduce_scatter(const Tensor& out, const Tensor& in) override {
    return on(in).start_reduce_scatter(out, in);
  }
  void gather(const Tensor& out, const Tensor& in, int root) override { on(in).gather(out, in, root); }
  void all_to_all(const Tensor& out, const std::vector<int64_t>& recv_rows, const Tensor& in,
                  const std::vector<int64_t>& send_rows) override {
    on(in).all_to_all(out, recv_rows, in, send_rows);
  }
  void send(const Tensor& x, int peer, int tag) override { on(x).send(x, peer, tag); }
  void recv(const Tensor& x, int peer, int tag) override { on(x).recv(x, peer, tag); }
  std::unique_ptr<PendingCollective> start_send(const Tensor& x, int peer, int tag) override {
    return on(x).start_send(x, peer, tag);
  }
  std::unique_ptr<PendingCollective> start_send_recv(const Tensor& x, int to, const Tensor& y, int from) override {
    return on(x).start_send_recv(x, to, y, from);
  }
  // Host work and device work both reach it.
  void barrier() override {
    device_->barrier();
    host_->barrier();
  }

  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    auto host = host_->split(ranks);
    return make_group_communicator(std::move(host), device_->split(ranks));
  }

 private:
  Communicator& on(const Tensor& x) { return x.device == Device::Cpu ? *host_ : *device_; }

  std::unique_ptr<Communicator> host_, device_;
};

}  // namespace

std::unique_ptr<Communicator> make_group_communicator(std::unique_ptr<Communicator> host,
                                                      std::unique_ptr<Communicator> device) {
  return std::make_unique<GroupCommunicator>(std::move(host), std::move(device));
}

}  // namespace kiln
