#include "trainer/parallel/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <thread>
#include <vector>

#include "kernels/check.h"

namespace kiln {
namespace {

// MPI counts are ints: larger tensors go in pieces of this many elements.
constexpr int64_t kPiece = int64_t{1} << 30;

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail(std::string("MPI ") + call + " failed: " + std::string(text, static_cast<size_t>(length)));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::BF16:
    case DType::F16:
      return MPI_UINT16_T;  // moved as bits; reductions refuse them (mpi_reducible)
  }
  return MPI_BYTE;
}

void check_host(const Tensor& x, const char* what) {
  KILN_CHECK(x.device == Device::Cpu, std::string(what) + ": the MPI communicator moves host "
                                                          "tensors; a GPU tensor needs NCCL");
}

void check_reducible(const Tensor& x, const char* what) {
  check_host(x, what);
  KILN_CHECK(x.dtype != DType::BF16 && x.dtype != DType::F16,
             std::string(what) + ": MPI cannot add " + dtype_name(x.dtype) + " values");
}

int int_count(int64_t n, const char* what) {
  KILN_CHECK(n <= INT_MAX, std::string(what) + ": " + std::to_string(n) +
                               " elements per rank is more than MPI counts");
  return static_cast<int>(n);
}

// Waits for a request by polling, then polling with short sleeps, rather than with MPI's busy
// wait: a rank held at a broadcast (in a paused run, every rank but the one reading the
// store's commands) then leaves its core idle.
void wait_idle(MPI_Request& request) {
  constexpr int kSpins = 1000;
  int done = 0;
  for (int spin = 0;; ++spin) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "Test");
    if (done) return;
    if (spin > kSpins) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

class MpiPending final : public PendingCollective {
 public:
  void add(MPI_Request request) { requests_.push_back(request); }
  void wait() override {
    for (MPI_Request& request : requests_) wait_idle(request);
    requests_.clear();
  }
  ~MpiPending() override {
    // MPI needs every request completed, even on the way out of an error.
    for (MPI_Request& request : requests_) MPI_Wait(&request, MPI_STATUS_IGNORE);
  }

 private:
  std::vector<MPI_Request> requests_;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "Comm_size");
  }
  ~MpiCommunicator() override {
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce(const Tensor& x, ReduceOp op) override { start_all_reduce(x, op)->wait(); }

  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& x, ReduceOp op) override {
    check_reducible(x, "all_reduce");
    auto pending = std::make_unique<MpiPending>();
    auto* bytes = static_cast<char*>(x.data);
    for (int64_t at = 0; at < x.numel(); at += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, x.numel() - at));
      MPI_Request request;
      check(MPI_Iallreduce(MPI_IN_PLACE, bytes + at * static_cast<int64_t>(dtype_size(x.dtype)), n,
                           mpi_type(x.dtype), op == ReduceOp::Sum ? MPI_SUM : MPI_MAX, comm_,
                           &request),
            "Iallreduce");
      pending->add(request);
    }
    return pending;
  }

  void broadcast(const Tensor& x, int root) override {
    check_host(x, "broadcast");
    auto* bytes = static_cast<char*>(x.data);
    for (int64_t at = 0; at < x.numel(); at += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, x.numel() - at));
      MPI_Request request;
      check(MPI_Ibcast(bytes + at * static_cast<int64_t>(dtype_size(x.dtype)), n,
                       mpi_type(x.dtype), root, comm_, &request),
            "Ibcast");
      wait_idle(request);
    }
  }

  void all_gather(const Tensor& out, const Tensor& in) override {
    check_host(in, "all_gather");
    check_gather_shapes(out, in, size_, "all_gather");
    const int n = int_count(in.numel(), "all_gather");
    check(MPI_Allgather(in.data, n, mpi_type(in.dtype), out.data, n, mpi_type(in.dtype), comm_),
          "Allgather");
  }

  void reduce_scatter(const Tensor& out, const Tensor& in) override {
    check_reducible(in, "reduce_scatter");
    check_gather_shapes(in, out, size_, "reduce_scatter");
    check(MPI_Reduce_scatter_block(in.data, out.data, int_count(out.numel(), "reduce_scatter"),
                                   mpi_type(in.dtype), MPI_SUM, comm_),
          "Reduce_scatter_block");
  }

  void gather(const Tensor& out, const Tensor& in, int root) override {
    check_host(in, "gather");
    if (rank_ == root) check_gather_shapes(out, in, size_, "gather");
    const int n = int_count(in.numel(), "gather");
    check(MPI_Gather(in.data, n, mpi_type(in.dtype), rank_ == root ? out.data : nullptr, n,
                     mpi_type(in.dtype), root, comm_),
          "Gather");
  }

  void send(const Tensor& x, int peer) override {
    check_host(x, "send");
    check(MPI_Send(x.data, int_count(x.numel(), "send"), mpi_type(x.dtype), peer, 0, comm_),
          "Send");
  }

  void recv(const Tensor& x, int peer) override {
    check_host(x, "recv");
    check(MPI_Recv(x.data, int_count(x.numel(), "recv"), mpi_type(x.dtype), peer, 0, comm_,
                   MPI_STATUS_IGNORE),
          "Recv");
  }

  void barrier() override { check(MPI_Barrier(comm_), "Barrier"); }

  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    const auto me = std::find(ranks.begin(), ranks.end(), rank_);
    KILN_CHECK(me != ranks.end(), "split: rank " + std::to_string(rank_) +
                                      " is not in the group it was given");
    // Groups partition the ranks, so a group's smallest rank names it; a rank's place in
    // the list orders the new communicator.
    const int color = *std::min_element(ranks.begin(), ranks.end());
    MPI_Comm group;
    check(MPI_Comm_split(comm_, color, static_cast<int>(me - ranks.begin()), &group),
          "Comm_split");
    return std::make_unique<MpiCommunicator>(group);
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

MpiSession::MpiSession() {
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "Init_thread");
}

MpiSession::~MpiSession() { MPI_Finalize(); }

std::unique_ptr<Communicator> MpiSession::world() {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

}  // namespace kiln
