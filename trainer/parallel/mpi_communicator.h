// MPI for tensors in host memory: the CPU backend's communicator, and the bootstrap of the
// NCCL one. MPI_Init runs once per process, through MpiSession.
#pragma once

#include <memory>
#include <string>

#include "trainer/parallel/communicator.h"

namespace kiln {

class MpiSession {
 public:
  MpiSession();  // MPI_Init_thread; kiln::Error when MPI cannot start
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Every rank of the launch (MPI_COMM_WORLD), while a session is open.
  static std::unique_ptr<Communicator> world();

  // Ends every rank of the launch, this one having failed with `message`: first tells the
  // other ranks when asked (they stop waiting and report it: rank 0 records it in the
  // store, then tells them it has), or waits (up to the wait timeout) for rank 0 to tell.
  // Then MPI_Abort: MPI_Finalize would wait for ranks held in a collective.
  [[noreturn]] static void end_run(const std::string& message, bool tell_others,
                                   bool await_rank_zero);
};

}  // namespace kiln
