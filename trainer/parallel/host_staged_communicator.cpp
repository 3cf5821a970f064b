#include "trainer/parallel/host_staged_communicator.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/half_convert.h"

namespace kiln {
namespace {

bool on_host(const Tensor& x) { return x.device == Device::Cpu; }

// Page-locked buffers reused from call to call: page-locking is slow (milliseconds), and the
// same shapes come back every step. A started all-reduce holds its buffer until it is waited
// for, so the pool holds as many buffers as were ever taken at once, and no more: a buffer too
// small for a call makes room for the bigger one.
class StagingPool {
 public:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };

  explicit StagingPool(Ops& ops) : ops_(ops) {}
  ~StagingPool() {
    for (const Buffer& b : free_) ops_.release_host(b.data);
  }
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  Buffer take(size_t bytes) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes)) best = it;
    if (best != free_.end()) {
      const Buffer b = *best;
      free_.erase(best);
      return b;
    }
    if (!free_.empty()) {
      ops_.release_host(free_.back().data);
      free_.pop_back();
    }
    return {ops_.allocate_host(bytes), bytes};
  }
  void give_back(const Buffer& b) { free_.push_back(b); }

 private:
  Ops& ops_;
  std::vector<Buffer> free_;
};

// A device tensor's copy in host memory, in buffers from the pool, given back when it goes.
// For a reduction (`widen`), bf16 and fp16 values are held as float.
class HostCopy {
 public:
  HostCopy(StagingPool& pool, const Tensor& device, bool widen)
      : pool_(pool),
        device_(device),
        widen_(widen && (device.dtype == DType::BF16 || device.dtype == DType::F16)),
        raw_(pool.take(device.bytes())),
        wide_(widen_ ? pool.take(static_cast<size_t>(device.numel()) * sizeof(float)) : StagingPool::Buffer{}) {}
  ~HostCopy() {
    pool_.give_back(raw_);
    if (widen_) pool_.give_back(wide_);
  }
  HostCopy(const HostCopy&) = delete;
  HostCopy& operator=(const HostCopy&) = delete;

  // The tensor the MPI call works on.
  Tensor host() const {
    return widen_ ? Tensor{wide_.data, DType::F32, device_.shape} : Tensor{raw_.data, device_.dtype, device_.shape};
  }

  // Device to host, after the ops queued before.
  void load(Ops& ops) {
    ops.copy_to_host(raw_.data, device_);
    if (!widen_) return;
    const auto* bits = static_cast<const uint16_t*>(raw_.data);
    auto* values = static_cast<float*>(wide_.data);
    const bool bf16 = device_.dtype == DType::BF16;
    for (int64_t i = 0; i < device_.numel(); ++i) values[i] = bf16 ? bf16_to_float(bits[i]) : f16_to_float(bits[i]);
  }

  // Host to device, rounding widened values back as the device would.
  void store(Ops& ops) {
    if (widen_) {
      const auto* values = static_cast<const float*>(wide_.data);
      auto* bits = static_cast<uint16_t*>(raw_.data);
      const bool bf16 = device_.dtype == DType::BF16;
      for (int64_t i = 0; i < device_.numel(); ++i) bits[i] = bf16 ? float_to_bf16(values[i]) : float_to_f16(values[i]);
    }
    ops.copy_from_host(device_, raw_.data);
  }

 private:
  StagingPool& pool_;
  Tensor device_;
  bool widen_;
  StagingPool::Buffer raw_, wide_;
};

// A started all-reduce of a device tensor: MPI works on the host copy, which goes back to the
// device when the caller waits.
// A gather or a reduce-scatter also keeps the host copy of its input (`source`) until then.
class StagedPending final : public PendingCollective {
 public:
  StagedPending(std::unique_ptr<PendingCollective> transfer, std::unique_ptr<HostCopy> copy, Ops& ops,
                std::unique_ptr<HostCopy> source = nullptr)
      : copy_(std::move(copy)), source_(std::move(source)), transfer_(std::move(transfer)), ops_(ops) {}
  void wait() override {
    if (!copy_) return;
    transfer_->wait();
    copy_->store(ops_);
    copy_.reset();
    source_.reset();
  }

 private:
  // Declared first: they outlive the transfer that reads them.
  std::unique_ptr<HostCopy> copy_;
  std::unique_ptr<HostCopy> source_;
  std::unique_ptr<PendingCollective> transfer_;
  Ops& ops_;
};

class HostStagedCommunicator final : public Communicator {
 public:
  HostStagedCommunicator(std::unique_ptr<Communicator> host, Ops& ops)
      : host_(std::move(host)), ops_(ops), pool_(ops) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string backend() const override { return host_->backend() + ", staged through host memory"; }

  void all_reduce(const Tensor& x, ReduceOp op) override {
    if (on_host(x)) return host_->all_reduce(x, op);
    HostCopy copy(pool_, x, true);
    copy.load(ops_);
    host_->all_reduce(copy.host(), op);
    copy.store(ops_);
  }

  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& x, ReduceOp op) override {
    if (on_host(x)) return host_->start_all_reduce(x, op);
    auto copy = std::make_unique<HostCopy>(pool_, x, true);
    copy->load(ops_);
    auto transfer = host_->start_all_reduce(copy->host(), op);
    return std::make_unique<StagedPending>(std::move(transfer), std::move(copy), ops_);
  }

  void broadcast(const Tensor& x, int root) override {
    if (on_host(x)) return host_->broadcast(x, root);
    HostCopy copy(pool_, x, false);
    if (rank() == root) copy.load(ops_);
    host_->broadcast(copy.host(), root);
    copy.store(ops_);
  }

  std::unique_ptr<PendingCollective> start_all_gather(const Tensor& out, const Tensor& in) override {
    if (on_host(in) && on_host(out)) return host_->start_all_gather(out, in);
    same_device(out, in, "all_gather");
    auto share = std::make_unique<HostCopy>(pool_, in, false);
    auto whole = std::make_unique<HostCopy>(pool_, out, false);
    share->load(ops_);
    auto transfer = host_->start_all_gather(whole->host(), share->host());
    return std::make_unique<StagedPending>(std::move(transfer), std::move(whole), ops_, std::move(share));
  }

  std::unique_ptr<PendingCollective> start_reduce_scatter(const Tensor& out, const Tensor& in) override {
    if (on_host(in) && on_host(out)) return host_->start_reduce_scatter(out, in);
    same_device(out, in, "reduce_scatter");
    auto whole = std::make_unique<HostCopy>(pool_, in, true);
    auto share = std::make_unique<HostCopy>(pool_, out, true);
    whole->load(ops_);
    auto transfer = host_->start_reduce_scatter(share->host(), whole->host());
    return std::make_unique<StagedPending>(std::move(transfer), std::move(share), ops_, std::move(whole));
  }

  void gather(const Tensor& out, const Tensor& in, int root) override {
    if (on_host(in) && (rank() != root || on_host(out))) return host_->gather(out, in, root);
    HostCopy share(pool_, in, false);
    share.load(ops_);
    if (rank() != root) return host_->gather(Tensor{}, share.host(), root);
    same_device(out, in, "gather");
    HostCopy whole(pool_, out, false);
    host_->gather(whole.host(), share.host(), root);
    whole.store(ops_);
  }

  void all_to_all(const Tensor& out, const std::vector<int64_t>& recv_rows, const Tensor& in,
                  const std::vector<int64_t>& send_rows) override {
    if (on_host(in) && on_host(out)) return host_->all_to_all(out, recv_rows, in, send_rows);
    same_device(out, in, "all_to_all");
    HostCopy sent(pool_, in, false), received(pool_, out, false);
    sent.load(ops_);
    host_->all_to_all(received.host(), recv_rows, sent.host(), send_rows);
    received.store(ops_);
  }

  void send(const Tensor& x, int peer, int tag) override {
    if (on_host(x)) return host_->send(x, peer, tag);
    HostCopy copy(pool_, x, false);
    copy.load(ops_);
    host_->send(copy.host(), peer, tag);
  }

  void recv(const Tensor& x, int peer, int tag) override {
    if (on_host(x)) return host_->recv(x, peer, tag);
    HostCopy copy(pool_, x, false);
    host_->recv(copy.host(), peer, tag);
    copy.store(ops_);
  }

  std::unique_ptr<PendingCollective> start_send(const Tensor& x, int peer, int tag) override {
    if (on_host(x)) return host_->start_send(x, peer, tag);
    HostCopy copy(pool_, x, false);
    copy.load(ops_);
    // The host communicator copies what it sends before it returns: the buffer is free again.
    return host_->start_send(copy.host(), peer, tag);
  }

  std::unique_ptr<PendingCollective> start_send_recv(const Tensor& x, int to, const Tensor& y, int from) override {
    if (on_host(x) && on_host(y)) return host_->start_send_recv(x, to, y, from);
    same_device(y, x, "send_recv");
    HostCopy sent(pool_, x, false);
    sent.load(ops_);
    auto received = std::make_unique<HostCopy>(pool_, y, false);
    // The host communicator copies what it sends before it returns: `sent` is free again.
    auto transfer = host_->start_send_recv(sent.host(), to, received->host(), from);
    return std::make_unique<StagedPending>(std::move(transfer), std::move(received), ops_);
  }

  void barrier() override { host_->barrier(); }

  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    return make_host_staged_communicator(host_->split(ranks), ops_);
  }

 private:
  static void same_device(const Tensor& out, const Tensor& in, const char* what) {
    KILN_CHECK(out.device == in.device, std::string(what) + ": the input and the output are on different devices");
  }

  std::unique_ptr<Communicator> host_;
  Ops& ops_;
  StagingPool pool_;
};

}  // namespace

std::unique_ptr<Communicator> make_host_staged_communicator(std::unique_ptr<Communicator> host, Ops& ops) {
  return std::make_unique<HostStagedCommunicator>(std::move(host), ops);
}

}  // namespace kiln
