#include "trainer/parallel/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "base/check.h"
#include "trainer/parallel/mpi_roll_call.h"
#include "trainer/parallel/wait_limits.h"

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
    case DType::E4M3:
    case DType::E5M2:
      return MPI_UINT8_T;
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

// A rank that fails on its own tells every other rank before it ends the run, over a
// communicator of their own, so they stop waiting at once instead of at the timeout and
// rank 0 records the failure in the store. Every wait polls for such a notice.
class FailureNotices {
 public:
  static constexpr int kBytes = 1024;  // a notice's text, cut to fit

  void open() {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "Comm_dup");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler");
    listen();
  }

  void close() {
    if (comm_ == MPI_COMM_NULL) return;
    MPI_Cancel(&incoming_);
    MPI_Wait(&incoming_, MPI_STATUS_IGNORE);
    MPI_Comm_free(&comm_);
  }

  // Throws PeerFailed when another rank has told of its failure.
  void check_in() {
    if (const std::optional<Notice> notice = received())
      throw PeerFailed(fmt::format("{} failed: {}", rank_on_host(notice->from), notice->text));
  }

  // Tells every other rank, giving the notices a moment to leave before the process ends.
  void tell_all(const std::string& message) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm_, &rank);
    MPI_Comm_size(comm_, &size);
    std::vector<char> text(message.begin(), message.begin() + std::min<size_t>(message.size(), kBytes - 1));
    text.resize(kBytes, '\0');
    std::vector<MPI_Request> sends;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      sends.emplace_back();
      if (MPI_Isend(text.data(), kBytes, MPI_CHAR, peer, 0, comm_, &sends.back()) != MPI_SUCCESS)
        sends.pop_back();  // a peer that cannot be reached is not told
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    int done = 0;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      if (MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done,
                      MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Waits up to `seconds` for rank 0's notice: rank 0 sends one once it has recorded the
  // failure. False when none came.
  bool await_rank_zero(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::optional<Notice> notice = received();
      if (notice && notice->from == 0) return true;
      answer_roll_call();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

 private:
  struct Notice {
    int from;
    std::string text;
  };

  void listen() {
    check(MPI_Irecv(text_, kBytes, MPI_CHAR, MPI_ANY_SOURCE, 0, comm_, &incoming_), "Irecv");
  }

  // The notice that came, if one did; listens for the next one.
  std::optional<Notice> received() {
    if (comm_ == MPI_COMM_NULL) return std::nullopt;
    int done = 0;
    MPI_Status status;
    check(MPI_Test(&incoming_, &done, &status), "Test");
    if (!done) return std::nullopt;
    text_[kBytes - 1] = '\0';
    Notice notice{status.MPI_SOURCE, text_};
    listen();
    return notice;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request incoming_ = MPI_REQUEST_NULL;
  char text_[kBytes] = {};
};

FailureNotices notices;

// Waits for requests by polling, then polling with short sleeps, rather than with MPI's busy
// wait: a rank held at a broadcast (in a paused run, every rank but the one reading the
// store's commands) then leaves its core idle. Gives up (kiln::Error) past the wait limits
// or when another rank tells of its failure.
void wait_idle(std::vector<MPI_Request>& requests, const std::string& what) {
  constexpr int kSpins = 1000;
  WaitClock clock(what);
  int done = 0;
  for (int spin = 0;; ++spin) {
    check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                      MPI_STATUSES_IGNORE),
          "Testall");
    if (done) return;
    clock.check();
    if (spin > kSpins) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void wait_idle(MPI_Request request, const std::string& what) {
  std::vector<MPI_Request> one{request};
  wait_idle(one, what);
}

// start_send_recv's messages: a ring runs on a communicator of its own, so one tag serves.
constexpr int kRingTag = 0;

class MpiPending final : public PendingCollective {
 public:
  explicit MpiPending(std::string what) : what_(std::move(what)) {}
  void add(MPI_Request request) { requests_.push_back(request); }
  // A copy of x's bytes that lives as long as the transfer.
  const std::vector<char>& keep(const Tensor& x) {
    const auto* bytes = static_cast<const char*>(x.data);
    kept_.assign(bytes, bytes + x.bytes());
    return kept_;
  }
  void wait() override {
    wait_idle(requests_, what_);
    requests_.clear();
  }
  // Requests still open here belong to a run on its way out of an error, which ends every
  // rank with MPI_Abort: waiting for them could wait for a dead rank.

 private:
  std::string what_;
  std::vector<MPI_Request> requests_;
  std::vector<char> kept_;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "Comm_size");
    // The launch's numbers of this communicator's ranks, which the messages of a wait
    // that gives up name.
    MPI_Group group, world;
    check(MPI_Comm_group(comm_, &group), "Comm_group");
    check(MPI_Comm_group(MPI_COMM_WORLD, &world), "Comm_group");
    std::vector<int> mine(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) mine[static_cast<size_t>(r)] = r;
    world_ranks_.resize(mine.size());
    check(MPI_Group_translate_ranks(group, size_, mine.data(), world, world_ranks_.data()),
          "Group_translate_ranks");
    MPI_Group_free(&group);
    MPI_Group_free(&world);
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
    auto pending = std::make_unique<MpiPending>(over("all_reduce"));
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
      wait_idle(request, fmt::format("broadcast from rank {} {}", world_rank(root), over("")));
    }
  }

  std::unique_ptr<PendingCollective> start_all_gather(const Tensor& out, const Tensor& in) override {
    check_host(in, "all_gather");
    check_gather_shapes(out, in, size_, "all_gather");
    const int n = int_count(in.numel(), "all_gather");
    auto pending = std::make_unique<MpiPending>(over("all_gather"));
    MPI_Request request;
    check(MPI_Iallgather(in.data, n, mpi_type(in.dtype), out.data, n, mpi_type(in.dtype), comm_,
                         &request),
          "Iallgather");
    pending->add(request);
    return pending;
  }

  std::unique_ptr<PendingCollective> start_reduce_scatter(const Tensor& out, const Tensor& in) override {
    check_reducible(in, "reduce_scatter");
    check_gather_shapes(in, out, size_, "reduce_scatter");
    auto pending = std::make_unique<MpiPending>(over("reduce_scatter"));
    MPI_Request request;
    check(MPI_Ireduce_scatter_block(in.data, out.data, int_count(out.numel(), "reduce_scatter"),
                                    mpi_type(in.dtype), MPI_SUM, comm_, &request),
          "Ireduce_scatter_block");
    pending->add(request);
    return pending;
  }

  void gather(const Tensor& out, const Tensor& in, int root) override {
    check_host(in, "gather");
    if (rank_ == root) check_gather_shapes(out, in, size_, "gather");
    const int n = int_count(in.numel(), "gather");
    MPI_Request request;
    check(MPI_Igather(in.data, n, mpi_type(in.dtype), rank_ == root ? out.data : nullptr, n,
                      mpi_type(in.dtype), root, comm_, &request),
          "Igather");
    wait_idle(request, fmt::format("gather to rank {} {}", world_rank(root), over("")));
  }

  void all_to_all(const Tensor& out, const std::vector<int64_t>& recv_rows, const Tensor& in,
                  const std::vector<int64_t>& send_rows) override {
    check_host(in, "all_to_all");
    check_host(out, "all_to_all");
    const int64_t row = check_all_to_all(out, recv_rows, in, send_rows, size_);
    // Counts and displacements in elements, as MPI takes them.
    std::vector<int> send_counts(static_cast<size_t>(size_)), send_at(static_cast<size_t>(size_));
    std::vector<int> recv_counts(static_cast<size_t>(size_)), recv_at(static_cast<size_t>(size_));
    int64_t sent = 0, received = 0;
    for (size_t q = 0; q < static_cast<size_t>(size_); ++q) {
      send_counts[q] = int_count(send_rows[q] * row, "all_to_all");
      recv_counts[q] = int_count(recv_rows[q] * row, "all_to_all");
      send_at[q] = int_count(sent, "all_to_all");
      recv_at[q] = int_count(received, "all_to_all");
      sent += send_rows[q] * row;
      received += recv_rows[q] * row;
    }
    MPI_Request request;
    check(MPI_Ialltoallv(in.data, send_counts.data(), send_at.data(), mpi_type(in.dtype), out.data,
                         recv_counts.data(), recv_at.data(), mpi_type(in.dtype), comm_, &request),
          "Ialltoallv");
    wait_idle(request, over("all_to_all"));
  }

  void send(const Tensor& x, int peer, int tag) override {
    check_host(x, "send");
    MPI_Request request;
    check(MPI_Isend(x.data, int_count(x.numel(), "send"), mpi_type(x.dtype), peer, tag, comm_,
                    &request),
          "Isend");
    wait_idle(request, fmt::format("send to rank {}", world_rank(peer)));
  }

  std::unique_ptr<PendingCollective> start_send(const Tensor& x, int peer, int tag) override {
    check_host(x, "send");
    auto pending = std::make_unique<MpiPending>(fmt::format("send to rank {}", world_rank(peer)));
    const std::vector<char>& copy = pending->keep(x);
    MPI_Request request;
    check(MPI_Isend(copy.data(), int_count(x.numel(), "send"), mpi_type(x.dtype), peer, tag,
                    comm_, &request),
          "Isend");
    pending->add(request);
    return pending;
  }

  std::unique_ptr<PendingCollective> start_send_recv(const Tensor& x, int to, const Tensor& y, int from) override {
    check_host(x, "send_recv");
    check_host(y, "send_recv");
    auto pending = std::make_unique<MpiPending>(
        fmt::format("send to rank {} and recv from rank {}", world_rank(to), world_rank(from)));
    const std::vector<char>& copy = pending->keep(x);
    MPI_Request requests[2];
    check(MPI_Irecv(y.data, int_count(y.numel(), "recv"), mpi_type(y.dtype), from, kRingTag, comm_, &requests[0]),
          "Irecv");
    check(MPI_Isend(copy.data(), int_count(x.numel(), "send"), mpi_type(x.dtype), to, kRingTag, comm_,
                    &requests[1]),
          "Isend");
    pending->add(requests[0]);
    pending->add(requests[1]);
    return pending;
  }

  void recv(const Tensor& x, int peer, int tag) override {
    check_host(x, "recv");
    MPI_Request request;
    check(MPI_Irecv(x.data, int_count(x.numel(), "recv"), mpi_type(x.dtype), peer, tag, comm_,
                    &request),
          "Irecv");
    wait_idle(request, fmt::format("recv from rank {}", world_rank(peer)));
  }

  void barrier() override { barrier_named("barrier"); }

  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    const SplitKey key = split_key(ranks, rank_);
    // MPI_Comm_split blocks without a limit: every rank arrives first, or the wait gives up.
    barrier_named("split");
    MPI_Comm group;
    check(MPI_Comm_split(comm_, key.color, key.key, &group), "Comm_split");
    return std::make_unique<MpiCommunicator>(group);
  }

 private:
  int world_rank(int rank) const { return world_ranks_.at(static_cast<size_t>(rank)); }

  std::string over(const std::string& call) const { return over_ranks(call, world_ranks_); }

  void barrier_named(const std::string& call) {
    MPI_Request request;
    check(MPI_Ibarrier(comm_, &request), "Ibarrier");
    wait_idle(request, over(call));
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;  // of each rank here
};

}  // namespace

MpiSession::MpiSession() {
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "Init_thread");
  notices.open();
  open_roll_call();
  set_peer_failure_check([] { notices.check_in(); });
  set_roll_call({call_roll, answer_roll_call});
}

MpiSession::~MpiSession() {
  set_roll_call({});
  set_peer_failure_check(nullptr);
  close_roll_call();
  notices.close();
  MPI_Finalize();
}

void MpiSession::end_run(const std::string& message, bool tell_others, bool await_rank_zero) {
  if (tell_others) notices.tell_all(message);
  if (await_rank_zero) notices.await_rank_zero(std::max(wait_timeout_s(), kStopGrace));
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return
}

std::unique_ptr<Communicator> MpiSession::world() {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

}  // namespace kiln
