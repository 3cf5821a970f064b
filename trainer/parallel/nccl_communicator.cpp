#include "trainer/parallel/nccl_communicator.h"

#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "trainer/parallel/wait_limits.h"

namespace kiln {
namespace {

void check_nccl(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  fail(fmt::format("NCCL {} failed: {} ({})", call, ncclGetErrorString(result),
                   ncclGetLastError(nullptr)));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::E4M3:
    case DType::E5M2:
      return ncclUint8;
  }
  return ncclUint8;
}

void check_device(const Tensor& x, const char* what) {
  KILN_CHECK(x.device == Device::Cuda, std::string(what) + ": the NCCL communicator moves GPU "
                                                           "tensors; a host tensor needs MPI");
}

// NCCL pairs a send with the peer's next receive, in order: it has no tags.
void check_untagged(int tag) {
  KILN_CHECK(tag == 0, "send/recv: NCCL matches transfers by order and takes no tag (" +
                           std::to_string(tag) + ")");
}

class NcclCommunicator;

// A call queued on the stream: its end is an event the host polls.
class NcclPending final : public PendingCollective {
 public:
  NcclPending(NcclCommunicator& comm, cudaEvent_t done, std::string what)
      : comm_(comm), done_(done), what_(std::move(what)) {}
  ~NcclPending() override { cudaEventDestroy(done_); }
  void wait() override;
  cudaEvent_t done() const { return done_; }

 private:
  NcclCommunicator& comm_;
  cudaEvent_t done_;
  std::string what_;
};

class NcclCommunicator final : public Communicator {
 public:
  // world_ranks: the launch's number of each rank here, for the messages of a wait.
  NcclCommunicator(ncclComm_t comm, cudaStream_t compute, std::vector<int> world_ranks)
      : comm_(comm), compute_(compute), world_ranks_(std::move(world_ranks)) {
    check_nccl(ncclCommUserRank(comm_, &rank_), "CommUserRank");
    check_nccl(ncclCommCount(comm_, &size_), "CommCount");
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming));
    KILN_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(int32_t)));
  }
  ~NcclCommunicator() override {
    cudaFree(scratch_);
    cudaEventDestroy(inputs_ready_);
    cudaStreamDestroy(stream_);
    // An aborted communicator is already gone.
    if (!aborted_) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce(const Tensor& x, ReduceOp op) override { start_all_reduce(x, op)->wait(); }

  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& x, ReduceOp op) override {
    check_device(x, "all_reduce");
    follow_compute();
    check_nccl(ncclAllReduce(x.data, x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype),
                             op == ReduceOp::Sum ? ncclSum : ncclMax, comm_, stream_),
               "AllReduce");
    return queued(over("all_reduce"));
  }

  void broadcast(const Tensor& x, int root) override {
    check_device(x, "broadcast");
    follow_compute();
    check_nccl(ncclBroadcast(x.data, x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype),
                             root, comm_, stream_),
               "Broadcast");
    queued(fmt::format("broadcast from rank {} {}", world_rank(root), over("")))->wait();
  }

  std::unique_ptr<PendingCollective> start_all_gather(const Tensor& out, const Tensor& in) override {
    check_device(in, "all_gather");
    check_gather_shapes(out, in, size_, "all_gather");
    follow_compute();
    check_nccl(ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()),
                             nccl_type(in.dtype), comm_, stream_),
               "AllGather");
    return queued(over("all_gather"));
  }

  std::unique_ptr<PendingCollective> start_reduce_scatter(const Tensor& out, const Tensor& in) override {
    check_device(in, "reduce_scatter");
    check_gather_shapes(in, out, size_, "reduce_scatter");
    follow_compute();
    check_nccl(ncclReduceScatter(in.data, out.data, static_cast<size_t>(out.numel()),
                                 nccl_type(in.dtype), ncclSum, comm_, stream_),
               "ReduceScatter");
    return queued(over("reduce_scatter"));
  }

  void gather(const Tensor& out, const Tensor& in, int root) override {
    check_device(in, "gather");
    if (rank_ == root) check_gather_shapes(out, in, size_, "gather");
    // NCCL has no gather: every rank sends to the root, which receives each slice.
    const size_t n = static_cast<size_t>(in.numel());
    follow_compute();
    check_nccl(ncclGroupStart(), "GroupStart");
    check_nccl(ncclSend(in.data, n, nccl_type(in.dtype), root, comm_, stream_), "Send");
    if (rank_ == root) {
      auto* bytes = static_cast<char*>(out.data);
      for (int r = 0; r < size_; ++r)
        check_nccl(ncclRecv(bytes + static_cast<size_t>(r) * in.bytes(), n, nccl_type(in.dtype), r,
                            comm_, stream_),
                   "Recv");
    }
    check_nccl(ncclGroupEnd(), "GroupEnd");
    queued(fmt::format("gather to rank {} {}", world_rank(root), over("")))->wait();
  }

  void all_to_all(const Tensor& out, const std::vector<int64_t>& recv_rows, const Tensor& in,
                  const std::vector<int64_t>& send_rows) override {
    check_device(in, "all_to_all");
    check_device(out, "all_to_all");
    const size_t row = static_cast<size_t>(check_all_to_all(out, recv_rows, in, send_rows, size_));
    const size_t row_bytes = row * dtype_size(in.dtype);
    follow_compute();
    // NCCL has no all-to-all with counts: one send and one receive per peer, grouped.
    check_nccl(ncclGroupStart(), "GroupStart");
    size_t sent = 0, received = 0;
    for (int q = 0; q < size_; ++q) {
      const auto n_send = static_cast<size_t>(send_rows[static_cast<size_t>(q)]);
      const auto n_recv = static_cast<size_t>(recv_rows[static_cast<size_t>(q)]);
      if (n_send > 0)
        check_nccl(ncclSend(static_cast<const char*>(in.data) + sent * row_bytes, n_send * row,
                            nccl_type(in.dtype), q, comm_, stream_),
                   "Send");
      if (n_recv > 0)
        check_nccl(ncclRecv(static_cast<char*>(out.data) + received * row_bytes, n_recv * row,
                            nccl_type(in.dtype), q, comm_, stream_),
                   "Recv");
      sent += n_send;
      received += n_recv;
    }
    check_nccl(ncclGroupEnd(), "GroupEnd");
    queued(over("all_to_all"))->wait();
  }

  void send(const Tensor& x, int peer, int tag) override {
    check_device(x, "send");
    check_untagged(tag);
    follow_compute();
    check_nccl(ncclGroupStart(), "GroupStart");
    check_nccl(ncclSend(x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype), peer, comm_,
                        stream_),
               "Send");
    check_nccl(ncclGroupEnd(), "GroupEnd");
    queued(fmt::format("send to rank {}", world_rank(peer)))->wait();
  }

  void recv(const Tensor& x, int peer, int tag) override {
    check_device(x, "recv");
    check_untagged(tag);
    follow_compute();
    check_nccl(ncclGroupStart(), "GroupStart");
    check_nccl(ncclRecv(x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype), peer, comm_,
                        stream_),
               "Recv");
    check_nccl(ncclGroupEnd(), "GroupEnd");
    queued(fmt::format("recv from rank {}", world_rank(peer)))->wait();
  }

  std::unique_ptr<PendingCollective> start_send(const Tensor& x, int peer, int tag) override {
    check_device(x, "send");
    check_untagged(tag);
    follow_compute();
    check_nccl(ncclGroupStart(), "GroupStart");
    check_nccl(ncclSend(x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype), peer, comm_,
                        stream_),
               "Send");
    check_nccl(ncclGroupEnd(), "GroupEnd");
    auto sent = queued(fmt::format("send to rank {}", world_rank(peer)));
    // x stays as it is until the peer has it: the kernels queued after this, which may write
    // it, wait for the transfer on the device. The host goes on.
    KILN_CUDA_CHECK(cudaStreamWaitEvent(compute_, sent->done(), 0));
    return sent;
  }

  std::unique_ptr<PendingCollective> start_send_recv(const Tensor& x, int to, const Tensor& y, int from) override {
    check_device(x, "send_recv");
    check_device(y, "send_recv");
    follow_compute();
    check_nccl(ncclGroupStart(), "GroupStart");
    check_nccl(ncclSend(x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype), to, comm_, stream_), "Send");
    check_nccl(ncclRecv(y.data, static_cast<size_t>(y.numel()), nccl_type(y.dtype), from, comm_, stream_), "Recv");
    check_nccl(ncclGroupEnd(), "GroupEnd");
    return queued(fmt::format("send to rank {} and recv from rank {}", world_rank(to), world_rank(from)));
  }

  void barrier() override { barrier_named("barrier"); }

  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    const SplitKey key = split_key(ranks, rank_);
    // ncclCommSplit blocks without a limit: every rank arrives first, or the wait gives up.
    barrier_named("split");
    ncclComm_t group;
    check_nccl(ncclCommSplit(comm_, key.color, key.key, &group, nullptr), "CommSplit");
    std::vector<int> world;
    for (const int r : ranks) world.push_back(world_rank(r));
    return std::make_unique<NcclCommunicator>(group, compute_, std::move(world));
  }

  // Polls until `done` has happened on the stream, within the wait limits; after a short
  // spin, with sleeps, so a long wait leaves its core idle.
  void wait_for(cudaEvent_t done, const std::string& what) {
    constexpr int kSpins = 1000;
    WaitClock clock(what);
    for (int spin = 0;; ++spin) {
      const cudaError_t state = cudaEventQuery(done);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) KILN_CUDA_CHECK(state);
      ncclResult_t async = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &async), "CommGetAsyncError");
      check_nccl(async, what.c_str());
      try {
        clock.check();
      } catch (const WaitGaveUp&) {
        // The queued NCCL kernels would wait for the missing rank forever.
        ncclCommAbort(comm_);
        aborted_ = true;
        throw;
      }
      if (spin > kSpins) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  // NCCL runs on the communicator's own stream, after the kernels queued so far on the
  // compute stream (those that wrote its inputs): an event orders the two, so a started
  // all-reduce proceeds while backward goes on, and no call synchronises the device. A
  // blocking call's caller waits for it on the host before queueing more compute.
  void follow_compute() {
    KILN_CUDA_CHECK(cudaEventRecord(inputs_ready_, compute_));
    KILN_CUDA_CHECK(cudaStreamWaitEvent(stream_, inputs_ready_, 0));
  }

  std::unique_ptr<NcclPending> queued(std::string what) {
    cudaEvent_t done;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    KILN_CUDA_CHECK(cudaEventRecord(done, stream_));
    return std::make_unique<NcclPending>(*this, done, std::move(what));
  }

  void barrier_named(const std::string& call) {
    follow_compute();
    check_nccl(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_),
               "AllReduce");
    queued(over(call))->wait();
  }

  int world_rank(int rank) const { return world_ranks_.at(static_cast<size_t>(rank)); }

  std::string over(const std::string& call) const { return over_ranks(call, world_ranks_); }

  ncclComm_t comm_;
  cudaStream_t compute_;          // the ops' stream, which calls follow
  cudaStream_t stream_ = nullptr;  // this communicator's own, which its calls run on
  cudaEvent_t inputs_ready_ = nullptr;
  std::vector<int> world_ranks_;
  int rank_ = 0, size_ = 1;
  void* scratch_ = nullptr;  // the barrier's one element
  bool aborted_ = false;
};

void NcclPending::wait() { comm_.wait_for(done_, what_); }

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap,
                                                     cudaStream_t compute) {
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) check_nccl(ncclGetUniqueId(&id), "GetUniqueId");
  static_assert(sizeof id % sizeof(int32_t) == 0);
  bootstrap.broadcast(
      Tensor{&id, DType::I32, {static_cast<int64_t>(sizeof id / sizeof(int32_t))}}, 0);
  ncclComm_t comm;
  check_nccl(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()), "CommInitRank");
  std::vector<int> ranks(static_cast<size_t>(bootstrap.size()));
  for (int r = 0; r < bootstrap.size(); ++r) ranks[static_cast<size_t>(r)] = r;
  return std::make_unique<NcclCommunicator>(comm, compute, std::move(ranks));
}

}  // namespace kiln
