// MPI for tensors in host memory: the CPU backend's communicator, and the bootstrap of the
// NCCL one. MPI_Init runs once per process, through MpiSession.
#pragma once

#include <memory>

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
};

}  // namespace kiln
