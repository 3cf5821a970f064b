// The one interface every parallel layer and the trainer talk through: collectives and
// point-to-point transfers over a group of ranks. Backends: a single process (every
// collective is the identity), MPI for tensors in host memory (mpi_communicator.h), and
// NCCL for GPU tensors. All calls are collective over the communicator's ranks unless said
// otherwise, and every rank must make them in the same order with the same shapes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace kiln {

enum class ReduceOp { Sum, Max };

// A collective started and not yet waited for; its tensor must stay untouched until wait().
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // in this communicator
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi", "nccl"

  // x = op over every rank's x, in place.
  virtual void all_reduce(const Tensor& x, ReduceOp op) = 0;
  // all_reduce, started: it proceeds while the caller computes, until wait().
  virtual std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& x, ReduceOp op) = 0;
  // x = root's x.
  virtual void broadcast(const Tensor& x, int root) = 0;
  // out[size * n] = every rank's in[n], in rank order.
  void all_gather(const Tensor& out, const Tensor& in) { start_all_gather(out, in)->wait(); }
  // all_gather, started: the caller must not read out nor write in until wait() (fully
  // sharded data parallelism gathers the next layer's weights while this one computes).
  virtual std::unique_ptr<PendingCollective> start_all_gather(const Tensor& out, const Tensor& in) = 0;
  // out[n] = the sum over ranks of slice `rank` of in[size * n].
  void reduce_scatter(const Tensor& out, const Tensor& in) { start_reduce_scatter(out, in)->wait(); }
  // reduce_scatter, started, on the same terms.
  virtual std::unique_ptr<PendingCollective> start_reduce_scatter(const Tensor& out, const Tensor& in) = 0;
  // On root, out[size * n] = every rank's in[n] in rank order; out is not touched elsewhere.
  virtual void gather(const Tensor& out, const Tensor& in, int root) = 0;
  // Point to point, matched by peer and tag: blocks until the peer's matching call.
  virtual void send(const Tensor& x, int peer, int tag) = 0;
  virtual void recv(const Tensor& x, int peer, int tag) = 0;
  // send, started: the caller may overwrite x at once (MPI copies it before this returns;
  // on a GPU, later work on the ops' stream waits for the transfer); the transfer completes
  // when the peer receives it. Pipeline stages send this way, so a stage never waits on a
  // neighbour that waits on it.
  virtual std::unique_ptr<PendingCollective> start_send(const Tensor& x, int peer, int tag) = 0;
  // A ring's step, started: x goes to rank `to` while y arrives from rank `from` (each rank's
  // `to` sends to a rank whose `from` is it). The caller computes meanwhile; it must not
  // write x nor read y until wait(). Deadlock-free on every backend, where a send and a recv
  // called one after the other around a ring may not be.
  virtual std::unique_ptr<PendingCollective> start_send_recv(const Tensor& x, int to, const Tensor& y,
                                                             int from) = 0;
  // Rows to every rank and from every rank (expert parallelism's dispatch): in holds
  // send_rows[q] rows for each rank q in rank order, and out receives recv_rows[q] rows from
  // each rank q in rank order; a row is a tensor's numel / shape[0] elements, the same in
  // both. Each rank's recv_rows[q] must be rank q's send_rows[this rank].
  virtual void all_to_all(const Tensor& out, const std::vector<int64_t>& recv_rows, const Tensor& in,
                          const std::vector<int64_t>& send_rows) = 0;
  virtual void barrier() = 0;

  // A communicator over `ranks` (ranks of this communicator, in the new one's order), for
  // every rank of this one: each passes the group it belongs to, as ParallelLayout names
  // them. Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(const std::vector<int>& ranks) = 0;
};

// World of one: every collective leaves its data as it is (out = in where shapes differ).
std::unique_ptr<Communicator> make_single_process_communicator();

// How a rank joins the group `ranks` in a split: groups partition the ranks, so a group's
// smallest rank names it (color), and the rank's place in the list orders it (key).
// Refuses a rank that is not in the group.
struct SplitKey {
  int color;
  int key;
};
SplitKey split_key(const std::vector<int>& ranks, int rank);

// Checks shared by the backends: `what` for messages.
void check_gather_shapes(const Tensor& out, const Tensor& in, int size, const char* what);
// An all_to_all's tensors hold the rows its counts name; returns the elements in a row.
int64_t check_all_to_all(const Tensor& out, const std::vector<int64_t>& recv_rows, const Tensor& in,
                         const std::vector<int64_t>& send_rows, int size);

}  // namespace kiln
