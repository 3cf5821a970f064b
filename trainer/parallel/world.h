// The processes of a run: MPI's world when a launcher started several (or one) processes,
// else a world of one. Holds the MPI session, so it must outlive every communicator.
#pragma once

#include <exception>
#include <memory>

#include "trainer/parallel/communicator.h"

namespace kiln {

class MpiSession;

class World {
 public:
  // kiln::Error when a launcher started several processes and this build has no MPI.
  World();
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  Communicator& comm() { return *comm_; }

  // Called with the error that ends this process's part of a run. With several ranks it
  // prints the error naming this rank (rank 0 also another rank's failure it heard of)
  // and ends every rank (MpiSession::end_run); with one it returns, and the error goes on.
  void end_after_error(const std::exception& error);

 private:
  std::unique_ptr<MpiSession> session_;  // declared first: finalised last
  std::unique_ptr<Communicator> comm_;
};

}  // namespace kiln
